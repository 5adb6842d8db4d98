/**
 * Project, membership and API-key administration: the reads and the rule-bound
 * writes behind /v1/projects, /v1/organization/members and /v1/api-keys.
 *
 * Rules that must hold under concurrency (the last project admin cannot
 * leave) take the project row's lock first, so two admins leaving at once
 * cannot both pass the check.
 */
import type pg from 'pg';
import {
  addProjectMember,
  createApiKey,
  createProject,
  type OrganizationRole,
  type ProjectRole,
  type ProjectVisibility,
} from './accounts';
import { withTransaction, type Db } from './pool';
import type { Queryable } from './pool';
import { PLATFORM_PROJECT_SLUG } from '../shared/serverless';

export interface ProjectRow {
  id: string;
  organization_id: string;
  organization_name: string;
  name: string;
  slug: string;
  visibility: ProjectVisibility;
  is_default: boolean;
  created_at: Date;
  /** The caller's role in it; null when the caller is not a member. */
  role: ProjectRole | null;
}

/** Over `p` (projects) joined to `o` (its organization): see PROJECT_FROM. */
const PROJECT_COLUMNS = `p.id, p.organization_id, o.name AS organization_name, p.name, p.slug, p.visibility, p.is_default, p.created_at`;
const PROJECT_FROM = `projects p JOIN organizations o ON o.id = p.organization_id`;

/**
 * Projects of an organization that a user can see: the ones they belong to,
 * and the open and closed ones (visible to the organization; private
 * projects are seen by their members only). Organization admins see all.
 */
/**
 * Which projects a person sees, as SQL over `p` (projects) and `pm` (their membership of p): the
 * ones they belong to, the ones that are not private, and every one for an organization admin.
 * `role` is the SQL of their organization role.
 */
export const visibleToCaller = (role: string) =>
  `(pm.role IS NOT NULL OR p.visibility <> 'private' OR ${role}::text = 'Admin')`;

export async function listVisibleProjects(
  db: Queryable,
  organizationId: string,
  userId: string,
  organizationRole: OrganizationRole | null,
): Promise<ProjectRow[]> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${PROJECT_COLUMNS}, pm.role
       FROM ${PROJECT_FROM}
       LEFT JOIN project_members pm ON pm.project_id = p.id AND pm.user_id = $2
      WHERE p.organization_id = $1 AND ${visibleToCaller('$3')}
      ORDER BY p.is_default DESC, p.created_at, p.id`,
    [organizationId, userId, organizationRole],
  );
  return rows;
}

export async function findProjectForUser(
  db: Queryable,
  organizationId: string,
  projectId: string,
  userId: string,
): Promise<ProjectRow | null> {
  const { rows } = await db.query<ProjectRow>(
    `SELECT ${PROJECT_COLUMNS}, pm.role
       FROM ${PROJECT_FROM}
       LEFT JOIN project_members pm ON pm.project_id = p.id AND pm.user_id = $3
      WHERE p.organization_id = $1 AND p.id = $2`,
    [organizationId, projectId, userId],
  );
  return rows[0] ?? null;
}

/** A project's slug (fixed at its creation); undefined when the project is gone. */
export async function projectSlugOf(db: Queryable, projectId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ slug: string }>('SELECT slug FROM projects WHERE id = $1', [projectId]);
  return rows[0]?.slug;
}

export async function slugTaken(db: Queryable, slug: string): Promise<boolean> {
  // The platform's own project may not exist yet (it is made when the serverless pools are); its slug is kept for it.
  if (slug === PLATFORM_PROJECT_SLUG) return true;
  const { rowCount } = await db.query('SELECT 1 FROM projects WHERE slug = $1', [slug]);
  return (rowCount ?? 0) > 0;
}

/** A new project whose creator is its first admin. */
export async function createProjectWithAdmin(
  db: Db,
  p: { organizationId: string; name: string; slug: string; visibility: ProjectVisibility; creatorId: string },
): Promise<string> {
  return withTransaction(db, async (tx) => {
    const id = await createProject(tx, p);
    await addProjectMember(tx, id, p.creatorId, 'Admin');
    return id;
  });
}

export async function updateProject(
  db: Queryable,
  projectId: string,
  patch: { name?: string; visibility?: ProjectVisibility },
): Promise<void> {
  await db.query(`UPDATE projects SET name = coalesce($2, name), visibility = coalesce($3, visibility) WHERE id = $1`, [
    projectId,
    patch.name ?? null,
    patch.visibility ?? null,
  ]);
}

export interface MemberRow {
  user_id: string;
  email: string;
  name: string;
  role: string;
  created_at: Date;
}

export async function listProjectMembers(db: Queryable, projectId: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT u.id AS user_id, u.email, u.name, pm.role, pm.created_at
       FROM project_members pm JOIN users u ON u.id = pm.user_id
      WHERE pm.project_id = $1 ORDER BY pm.created_at, u.id`,
    [projectId],
  );
  return rows;
}

export async function listOrganizationMembers(db: Queryable, organizationId: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT u.id AS user_id, u.email, u.name, om.role, om.created_at
       FROM organization_members om JOIN users u ON u.id = om.user_id
      WHERE om.organization_id = $1 ORDER BY om.created_at, u.id`,
    [organizationId],
  );
  return rows;
}

/** The organization member with this user id or email; null when they are not in the organization. */
export async function findOrganizationMember(
  db: Queryable,
  organizationId: string,
  who: { userId?: string; email?: string },
): Promise<MemberRow | null> {
  const { rows } = await db.query<MemberRow>(
    `SELECT u.id AS user_id, u.email, u.name, om.role, om.created_at
       FROM organization_members om JOIN users u ON u.id = om.user_id
      WHERE om.organization_id = $1 AND (u.id = $2 OR lower(u.email) = lower($3))`,
    [organizationId, who.userId ?? null, who.email ?? null],
  );
  return rows[0] ?? null;
}

/** Why a membership change was refused; the route turns it into a 409 with this code. */
export class MembershipRuleError extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

async function lockProject(tx: pg.PoolClient, projectId: string) {
  const { rows } = await tx.query<{ is_default: boolean }>('SELECT is_default FROM projects WHERE id = $1 FOR UPDATE', [
    projectId,
  ]);
  return rows[0];
}

async function adminCount(tx: pg.PoolClient, projectId: string): Promise<number> {
  const { rows } = await tx.query<{ n: string }>(
    `SELECT count(*) AS n FROM project_members WHERE project_id = $1 AND role = 'Admin'`,
    [projectId],
  );
  return Number(rows[0].n);
}

/**
 * Takes a user out of a project (leaving, or being removed), under the
 * spec's rules: a non-member cannot leave the default project (org members
 * belong to it without a membership row, and that cannot be undone), and the
 * last project admin cannot leave or be removed. Their keys of the project are
 * revoked with the membership.
 */
export async function removeProjectMember(db: Db, projectId: string, userId: string): Promise<void> {
  await withTransaction(db, async (tx) => {
    const project = await lockProject(tx, projectId);
    const { rows } = await tx.query<{ role: ProjectRole }>(
      'SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2',
      [projectId, userId],
    );
    const membership = rows[0];
    if (!membership) {
      throw project?.is_default
        ? new MembershipRuleError(
            'Non-members cannot leave the default project: everyone in the organization belongs to it.',
            'not_a_member_of_default_project',
          )
        : new MembershipRuleError('The user is not a member of this project.', 'not_a_project_member');
    }
    if (membership.role === 'Admin' && (await adminCount(tx, projectId)) <= 1) {
      throw new MembershipRuleError(
        'The last admin of a project cannot leave it; make another member an admin first.',
        'last_project_admin',
      );
    }
    await tx.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [projectId, userId]);
    // Their keys go with the membership (in the default project they still belong, as organization members).
    if (!project?.is_default) {
      await tx.query(
        'UPDATE api_keys SET revoked_at = now() WHERE project_id = $1 AND user_id = $2 AND revoked_at IS NULL',
        [projectId, userId],
      );
    }
  });
}

/** Changes a member's role; demoting the last admin is refused like their leaving. */
export async function setProjectMemberRole(db: Db, projectId: string, userId: string, role: ProjectRole) {
  await withTransaction(db, async (tx) => {
    await lockProject(tx, projectId);
    const { rows } = await tx.query<{ role: ProjectRole }>(
      'SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2',
      [projectId, userId],
    );
    if (rows[0]?.role === 'Admin' && role !== 'Admin' && (await adminCount(tx, projectId)) <= 1) {
      throw new MembershipRuleError(
        'The last admin of a project cannot be demoted; make another member an admin first.',
        'last_project_admin',
      );
    }
    await addProjectMember(tx, projectId, userId, role);
  });
}

export interface ApiKeyRow {
  id: string;
  project_id: string;
  user_id: string | null;
  name: string;
  key_hint: string;
  legacy: boolean;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const KEY_COLUMNS = 'id, project_id, user_id, name, key_hint, legacy, created_at, last_used_at, revoked_at';

/** A project's keys; `userId` limits them to one user's own keys. */
export async function listApiKeys(db: Queryable, projectId: string, userId: string | null): Promise<ApiKeyRow[]> {
  const { rows } = await db.query<ApiKeyRow>(
    `SELECT ${KEY_COLUMNS} FROM api_keys
      WHERE project_id = $1 AND ($2::text IS NULL OR user_id = $2)
      ORDER BY created_at, id`,
    [projectId, userId],
  );
  return rows;
}

export async function findApiKey(db: Queryable, keyId: string): Promise<ApiKeyRow | null> {
  const { rows } = await db.query<ApiKeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1`, [keyId]);
  return rows[0] ?? null;
}

export async function defaultProjectOf(db: Queryable, organizationId: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM projects WHERE organization_id = $1 AND is_default', [
    organizationId,
  ]);
  return rows[0]?.id ?? null;
}

/**
 * Replaces the organization's legacy key: every unrevoked legacy key of the
 * default project is revoked and one new legacy key is made, atomically.
 *
 * The legacy key is shared by everyone who holds it, so it belongs to no user:
 * it acts as the default project's key and nothing more (no one's roles, no
 * administration), and it does not end when the person who regenerated it
 * leaves. A CHECK on api_keys (migration 035) keeps it so.
 */
export async function regenerateLegacyKey(
  db: Db,
  defaultProjectId: string,
): Promise<{ id: string; secret: string; revoked: string[] }> {
  return withTransaction(db, async (tx) => {
    await lockProject(tx, defaultProjectId);
    const { rows } = await tx.query<{ id: string }>(
      `UPDATE api_keys SET revoked_at = now()
        WHERE project_id = $1 AND legacy AND revoked_at IS NULL RETURNING id`,
      [defaultProjectId],
    );
    const key = await createApiKey(tx, { projectId: defaultProjectId, userId: null, name: 'legacy key', legacy: true });
    return { ...key, revoked: rows.map((r) => r.id) };
  });
}

/**
 * Takes a person out of an organization: their organization membership,
 * their memberships of its projects, and their keys in its projects
 * (revoked). The last organization admin cannot be removed.
 */
export async function removeOrganizationMember(db: Db, organizationId: string, userId: string): Promise<void> {
  await withTransaction(db, async (tx) => {
    await tx.query('SELECT id FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
    const { rows } = await tx.query<{ role: OrganizationRole; admins: string }>(
      `SELECT role, (SELECT count(*) FROM organization_members
                      WHERE organization_id = $1 AND role = 'Admin') AS admins
         FROM organization_members WHERE organization_id = $1 AND user_id = $2`,
      [organizationId, userId],
    );
    if (rows[0]?.role === 'Admin' && Number(rows[0].admins) <= 1) {
      throw new MembershipRuleError(
        'The last organization admin cannot be removed; make another member an admin first.',
        'last_organization_admin',
      );
    }
    const inOrg = 'SELECT id FROM projects WHERE organization_id = $1';
    await tx.query(
      `UPDATE api_keys SET revoked_at = now()
        WHERE user_id = $2 AND revoked_at IS NULL AND project_id IN (${inOrg})`,
      [organizationId, userId],
    );
    await tx.query(`DELETE FROM project_members WHERE user_id = $2 AND project_id IN (${inOrg})`, [
      organizationId,
      userId,
    ]);
    await tx.query('DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2', [
      organizationId,
      userId,
    ]);
  });
}
