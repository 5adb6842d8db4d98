/**
 * First start of an installation: a default organization, its default
 * project, an admin user (also operator of the installation) and one API key.
 * Runs once; on later starts it finds the organization and does nothing.
 */
import { PLATFORM_ORGANIZATION_ID } from '../shared/serverless';
import { withTransaction, type Db } from './pool';
import {
  addOrganizationMember,
  addProjectMember,
  createApiKey,
  createOrganization,
  createProject,
  createUser,
} from './accounts';

export interface BootstrapResult {
  organizationId: string;
  projectId: string;
  userId: string;
  apiKeyId: string;
  /** The admin key's secret. Shown once; never stored in the database. */
  apiKey: string;
}

const BOOTSTRAP_LOCK = 727_002;

export async function bootstrapDefaultAccount(db: Db): Promise<BootstrapResult | null> {
  return withTransaction(db, async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
    // The platform's own organization (db/platform-account.ts) is no sign of an earlier start.
    const { rowCount } = await tx.query('SELECT 1 FROM organizations WHERE id <> $1 LIMIT 1', [
      PLATFORM_ORGANIZATION_ID,
    ]);
    if (rowCount) return null;
    const organizationId = await createOrganization(tx, 'Default organization');
    // The installation's own organization sees its usage report (a beta, off for other organizations).
    await tx.query('UPDATE organizations SET billing_usage_enabled = true WHERE id = $1', [organizationId]);
    const projectId = await createProject(tx, {
      organizationId,
      name: 'Default project',
      slug: 'default',
      visibility: 'private',
      isDefault: true,
    });
    const userId = await createUser(tx, { email: 'admin@localhost', name: 'Administrator', isPlatformAdmin: true });
    await addOrganizationMember(tx, organizationId, userId, 'Admin');
    await addProjectMember(tx, projectId, userId, 'Admin');
    const key = await createApiKey(tx, { projectId, userId, name: 'bootstrap admin key' });
    return { organizationId, projectId, userId, apiKeyId: key.id, apiKey: key.secret };
  });
}
