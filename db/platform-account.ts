/**
 * The installation's own organization and project (shared/serverless.ts), which own the serverless
 * pools: created on first use, with fixed ids, so any number of API processes may ask at once. No
 * member and no API key is ever added, so no tenant's key resolves to this project; the usage its
 * replicas meter is the installation's own.
 */
import { PLATFORM_ORGANIZATION_ID, PLATFORM_PROJECT_ID, PLATFORM_PROJECT_SLUG } from '../shared/serverless';
import type { Queryable } from './pool';

export async function ensurePlatformProject(db: Queryable): Promise<string> {
  await db.query(`INSERT INTO organizations (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, [
    PLATFORM_ORGANIZATION_ID,
    'Gantry platform (serverless pools)',
  ]);
  await db.query(
    `INSERT INTO projects (id, organization_id, name, slug, visibility, is_default)
     VALUES ($1, $2, $3, $4, 'private', true) ON CONFLICT (id) DO NOTHING`,
    [PLATFORM_PROJECT_ID, PLATFORM_ORGANIZATION_ID, 'Serverless pools', PLATFORM_PROJECT_SLUG],
  );
  return PLATFORM_PROJECT_ID;
}
