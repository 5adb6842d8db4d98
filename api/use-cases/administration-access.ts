/**
 * Who may administer what, and the wire views shared by the project, member
 * and API-key routes.
 *
 * Administration acts for a person: the user behind the calling key. Their
 * roles are read from the database at the time of the call (not from the
 * cached principal, which describes the key's own project only).
 */
import type { Principal } from '../../db/accounts';
import { findProjectForUser, type ApiKeyRow, type MemberRow, type ProjectRow } from '../../db/administration';
import type { Queryable } from '../../db/pool';
import { forbidden, notFound } from '../errors';

/** The user a key acts for; keys made for services (no user) cannot administer. */
export function requireUser(p: Principal): string {
  if (!p.userId) {
    throw forbidden('This key is not tied to a user; administration needs a user key.', 'user_key_required');
  }
  return p.userId;
}

export function requireOrganizationAdmin(p: Principal): string {
  const userId = requireUser(p);
  if (p.organizationRole !== 'Admin') {
    throw forbidden('Only an organization admin can do this.', 'organization_admin_required');
  }
  return userId;
}

/**
 * A project of the caller's organization that the caller can see. Private
 * projects the caller is not in are "not found", like another
 * organization's projects, so their existence does not leak.
 */
export async function visibleProject(db: Queryable, p: Principal, projectId: string): Promise<ProjectRow> {
  const userId = requireUser(p);
  const project = await findProjectForUser(db, p.organizationId, projectId, userId);
  if (!project || (project.visibility === 'private' && !project.role && p.organizationRole !== 'Admin')) {
    throw notFound(`No project '${projectId}'.`, 'project_not_found');
  }
  return project;
}

/** Project admins and organization admins manage a project's settings, members and keys. */
export function requireProjectAdmin(p: Principal, project: ProjectRow): void {
  if (project.role !== 'Admin' && p.organizationRole !== 'Admin') {
    throw forbidden('Only an admin of this project or of the organization can do this.', 'project_admin_required');
  }
}

export const projectView = (r: ProjectRow) => ({
  id: r.id,
  object: 'project' as const,
  organization_id: r.organization_id,
  organization_name: r.organization_name,
  name: r.name,
  slug: r.slug,
  visibility: r.visibility,
  is_default: r.is_default,
  created_at: r.created_at.toISOString(),
  role: r.role,
});

export const memberView = (r: MemberRow) => ({
  object: 'member' as const,
  user_id: r.user_id,
  email: r.email,
  name: r.name,
  role: r.role,
  created_at: r.created_at.toISOString(),
});

/** An API key as every route shows it (never its secret). */
export const keyView = (k: ApiKeyRow) => ({
  id: k.id,
  object: 'api_key' as const,
  project_id: k.project_id,
  user_id: k.user_id,
  name: k.name,
  key_hint: k.key_hint,
  legacy: k.legacy,
  created_at: k.created_at.toISOString(),
  last_used_at: k.last_used_at?.toISOString() ?? null,
  revoked_at: k.revoked_at?.toISOString() ?? null,
});
