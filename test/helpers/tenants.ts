/** Organizations, projects and keys made through the same repository code the platform uses. */
import { randomBytes } from 'node:crypto';
import {
  addOrganizationMember,
  addProjectMember,
  createApiKey,
  createOrganization,
  createProject,
  createUser,
  type OrganizationRole,
  type ProjectRole,
} from '../../db/accounts';
import type { Db } from '../../db/pool';

export interface Tenant {
  organizationId: string;
  projectId: string;
  projectSlug: string;
  userId: string;
  keyId: string;
  key: string;
}

export async function createTenant(
  db: Db,
  opts: { platformAdmin?: boolean; projectRole?: ProjectRole; organizationRole?: OrganizationRole } = {},
): Promise<Tenant> {
  const suffix = randomBytes(4).toString('hex');
  const organizationId = await createOrganization(db, `Org ${suffix}`);
  const projectSlug = `proj-${suffix}`;
  const projectId = await createProject(db, { organizationId, name: `Project ${suffix}`, slug: projectSlug });
  const userId = await createUser(db, {
    email: `user-${suffix}@example.test`,
    name: `User ${suffix}`,
    isPlatformAdmin: opts.platformAdmin ?? false,
  });
  await addOrganizationMember(db, organizationId, userId, opts.organizationRole ?? 'Developer');
  await addProjectMember(db, projectId, userId, opts.projectRole ?? 'Editor');
  const key = await createApiKey(db, { projectId, userId, name: 'test key' });
  return { organizationId, projectId, projectSlug, userId, keyId: key.id, key: key.secret };
}
