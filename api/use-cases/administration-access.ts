/**
 * Who may administer what (the wire views are in api/presenters/administration.ts).
 *
 * Administration acts for a person: the user behind the calling key. Their
 * roles are read from the database at the time of the call (not from the
 * cached principal, which describes the key's own project only).
 */
import type { Principal } from '../../db/accounts';
import { findProjectForUser, type ProjectRow } from '../../db/administration';
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
