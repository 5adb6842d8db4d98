/**
 * Organizations, projects, users, memberships and API keys.
 *
 * API keys are 256-bit random secrets. Only their SHA-256 is stored: a fast
 * hash is the right tool for high-entropy secrets (nothing to brute-force), and
 * it lets a request find its key by an indexed equality lookup.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { WorkTag } from '../shared/work-tag';
import { newId } from '../platform/ids';
import type { Queryable } from './pool';

export type ProjectRole = 'Admin' | 'Editor';
export type OrganizationRole = 'Admin' | 'Developer';
export type ProjectVisibility = 'open' | 'closed' | 'private';

/** Who a request acts as: resolved from its API key on every call. */
export interface Principal {
  apiKeyId: string;
  userId: string | null;
  projectId: string;
  projectName: string;
  projectSlug: string;
  organizationId: string;
  organizationName: string;
  projectRole: ProjectRole | null;
  organizationRole: OrganizationRole | null;
  isPlatformAdmin: boolean;
  /** Set when the call is made for a batch or an evaluation with a work credential, not by the key itself. */
  work?: WorkTag;
}

const KEY_PREFIX = 'gantry_';

export function generateApiKeySecret(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

export function hashApiKey(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/**
 * What a key resolves to, with the rules every use of a key follows: not revoked, its project
 * and organization still there, and a person's key only while they belong to its project (a
 * member, or, for the default project, which everyone in the organization belongs to, an
 * organization member). `match` picks the key.
 */
const PRINCIPAL_QUERY = (match: string) =>
  `SELECT k.id AS api_key_id, k.user_id, p.id AS project_id, p.name AS project_name, p.slug AS project_slug,
          o.id AS organization_id, o.name AS organization_name,
          pm.role AS project_role, om.role AS organization_role,
          coalesce(u.is_platform_admin, false) AS is_platform_admin,
          (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute') AS use_is_stale
     FROM api_keys k
     JOIN projects p ON p.id = k.project_id
     JOIN organizations o ON o.id = p.organization_id
     LEFT JOIN users u ON u.id = k.user_id
     LEFT JOIN project_members pm ON pm.project_id = p.id AND pm.user_id = k.user_id
     LEFT JOIN organization_members om ON om.organization_id = o.id AND om.user_id = k.user_id
    WHERE ${match} AND k.revoked_at IS NULL
      AND (k.user_id IS NULL OR pm.role IS NOT NULL OR (p.is_default AND om.role IS NOT NULL))`;

const toPrincipal = (r: Record<string, any>): Principal => ({
  apiKeyId: r.api_key_id,
  userId: r.user_id,
  projectId: r.project_id,
  projectName: r.project_name,
  projectSlug: r.project_slug,
  organizationId: r.organization_id,
  organizationName: r.organization_name,
  projectRole: r.project_role,
  organizationRole: r.organization_role,
  isPlatformAdmin: r.is_platform_admin,
});

export async function findPrincipalByApiKey(db: Queryable, secret: string): Promise<Principal | null> {
  const { rows } = await db.query(PRINCIPAL_QUERY('k.key_hash = $1'), [hashApiKey(secret)]);
  const r = rows[0];
  if (!r) return null;
  // Record use at most once a minute per key, so reads do not become writes (nor extra round trips).
  if (r.use_is_stale) await recordApiKeyUse(db, r.api_key_id);
  return toPrincipal(r);
}

/**
 * The principal of a key named by its id, if that key would still authenticate a request now:
 * for credentials made on a key's behalf (pre-signed download URLs), which must end with it.
 */
export async function findPrincipalByApiKeyId(db: Queryable, apiKeyId: string): Promise<Principal | null> {
  const { rows } = await db.query(PRINCIPAL_QUERY('k.id = $1'), [apiKeyId]);
  return rows[0] ? toPrincipal(rows[0]) : null;
}

/** Sets last_used_at, unless it was set within the last minute. */
export async function recordApiKeyUse(db: Queryable, apiKeyId: string): Promise<void> {
  await db.query(
    `UPDATE api_keys SET last_used_at = now()
      WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`,
    [apiKeyId],
  );
}

export async function createOrganization(db: Queryable, name: string): Promise<string> {
  const id = newId('org');
  await db.query('INSERT INTO organizations (id, name) VALUES ($1, $2)', [id, name]);
  return id;
}

/** Whether this installation (this database) has the project `id`. */
export async function projectExists(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM projects WHERE id = $1', [id]);
  return (rowCount ?? 0) > 0;
}

export async function createProject(
  db: Queryable,
  p: { organizationId: string; name: string; slug: string; visibility?: ProjectVisibility; isDefault?: boolean },
): Promise<string> {
  const id = newId('proj');
  await db.query(
    'INSERT INTO projects (id, organization_id, name, slug, visibility, is_default) VALUES ($1, $2, $3, $4, $5, $6)',
    [id, p.organizationId, p.name, p.slug, p.visibility ?? 'private', p.isDefault ?? false],
  );
  return id;
}

export async function createUser(
  db: Queryable,
  u: { email: string; name: string; isPlatformAdmin?: boolean },
): Promise<string> {
  const id = newId('user');
  await db.query('INSERT INTO users (id, email, name, is_platform_admin) VALUES ($1, $2, $3, $4)', [
    id,
    u.email,
    u.name,
    u.isPlatformAdmin ?? false,
  ]);
  return id;
}

export async function addOrganizationMember(db: Queryable, orgId: string, userId: string, role: OrganizationRole) {
  await db.query(
    `INSERT INTO organization_members (organization_id, user_id, role) VALUES ($1, $2, $3)
     ON CONFLICT (organization_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
    [orgId, userId, role],
  );
}

export async function addProjectMember(db: Queryable, projectId: string, userId: string, role: ProjectRole) {
  await db.query(
    `INSERT INTO project_members (project_id, user_id, role) VALUES ($1, $2, $3)
     ON CONFLICT (project_id, user_id) DO UPDATE SET role = EXCLUDED.role`,
    [projectId, userId, role],
  );
}

/** Creates a key and returns its secret: the only time the secret exists outside the caller. */
export async function createApiKey(
  db: Queryable,
  k: { projectId: string; userId: string | null; name: string; legacy?: boolean },
): Promise<{ id: string; secret: string }> {
  const id = newId('key');
  const secret = generateApiKeySecret();
  await db.query(
    `INSERT INTO api_keys (id, project_id, user_id, name, key_hash, key_hint, legacy)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [id, k.projectId, k.userId, k.name, hashApiKey(secret), secret.slice(-4), k.legacy ?? false],
  );
  return { id, secret };
}

export async function revokeApiKey(db: Queryable, keyId: string): Promise<void> {
  await db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [keyId]);
}
