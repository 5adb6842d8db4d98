/**
 * Projects of the caller's organization and their members (spec:
 * Authentication). Project roles are Admin and Editor; visibility is open
 * (any organization member may join), closed (visible, joined by being
 * added) or private (seen by its members only). Non-members cannot leave the
 * default project, and the last project admin cannot leave.
 */
import {
  createProjectWithAdmin,
  findOrganizationMember,
  findProjectForUser,
  listProjectMembers,
  listVisibleProjects,
  MembershipRuleError,
  removeProjectMember,
  setProjectMemberRole,
  slugTaken,
  updateProject,
} from '../../db/administration';
import { addProjectMember } from '../../db/accounts';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, forbidden, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  AddProjectMemberBody,
  CreateProjectBody,
  listOf,
  ListProjectsQuery,
  MemberSchema,
  ProjectListSchema,
  ProjectSchema,
  UpdateProjectBody,
} from '../schemas/administration';
import { requireProjectAdmin, requireUser, visibleProject } from '../use-cases/administration-access';
import { ProjectParams } from '../schemas/common';
import { MemberParams, ProjectOk } from '../schemas/administration';
import { toMember, toProject } from '../presenters/administration';

const asRuleConflict = (err: unknown) => {
  if (err instanceof MembershipRuleError) return conflict(err.message, err.code);
  return err;
};

export function addProjectRoutes(router: ApiRouter, { db, principals, config }: ApiDeps) {
  /** Roles resolve through the principal cache; a membership change must be seen by the next request. */
  const principalsChanged = () => principals?.drop();

  router.add({
    method: 'get',
    path: '/projects',
    operationId: 'listProjects',
    summary: "Projects of the caller's organization that the caller can see, with the caller's role in each",
    tags: ['administration'],
    strict: true,
    query: ListProjectsQuery,
    errors: [403],
    response: { status: 200, description: 'The projects', schema: ProjectListSchema },
    handler: async ({ principal, query }) => {
      const userId = requireUser(principal);
      const rows = await listVisibleProjects(db, principal.organizationId, userId, principal.organizationRole);
      const from = query.after === undefined ? 0 : rows.findIndex((r) => r.id === query.after) + 1;
      if (query.after !== undefined && from === 0)
        throw badRequest(`after: no project '${query.after}' in this list.`, 'after');
      const page = rows.slice(from, query.limit === undefined ? undefined : from + query.limit);
      const more = from + page.length < rows.length;
      return {
        object: 'list' as const,
        data: page.map(toProject),
        next_cursor: more ? page[page.length - 1]!.id : null,
      };
    },
  });

  router.add({
    method: 'post',
    path: '/projects',
    operationId: 'createProject',
    summary: 'Create a project in the caller’s organization; the caller becomes its admin',
    tags: ['administration'],
    strict: true,
    body: CreateProjectBody,
    errors: [403, 409],
    response: { status: 201, description: 'The project', schema: ProjectSchema },
    handler: async ({ principal, body }) => {
      const userId = requireUser(principal);
      if (!principal.organizationRole) {
        throw forbidden('Only members of the organization can create its projects.', 'organization_member_required');
      }
      // Every key belongs to a project, so the installation already has its one.
      if (config.singleTenant)
        throw conflict(
          'This installation is single-tenant (GANTRY_SINGLE_TENANT=yes: deployments may run as host processes ' +
            "of the platform's own user) and has its one project; it creates no second.",
          'single_tenant_installation',
        );
      // Slugs are global: they name endpoints (`<project_slug>/<endpoint>`) across the installation.
      if (await slugTaken(db, body.slug)) throw conflict(`The slug '${body.slug}' is taken.`, 'project_slug_taken');
      const id = await createProjectWithAdmin(db, {
        organizationId: principal.organizationId,
        creatorId: userId,
        ...body,
      });
      principalsChanged();
      return toProject((await findProjectForUser(db, principal.organizationId, id, userId))!);
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId',
    projectScope: 'organization',
    operationId: 'getProject',
    summary: 'One project',
    tags: ['administration'],
    strict: true,
    params: ProjectParams,
    errors: [403, 404],
    response: { status: 200, description: 'The project', schema: ProjectSchema },
    handler: async ({ principal, params }) => toProject(await visibleProject(db, principal, params.projectId)),
  });

  router.add({
    method: 'patch',
    path: '/projects/:projectId',
    projectScope: 'organization',
    operationId: 'updateProject',
    summary: "Rename a project or change its visibility (its admins and the organization's)",
    tags: ['administration'],
    strict: true,
    params: ProjectParams,
    body: UpdateProjectBody,
    errors: [403, 404],
    response: { status: 200, description: 'The project', schema: ProjectSchema },
    handler: async ({ principal, params, body }) => {
      const project = await visibleProject(db, principal, params.projectId);
      requireProjectAdmin(principal, project);
      if (project.is_default && body.visibility && body.visibility !== project.visibility) {
        throw badRequest(
          'The default project’s visibility cannot change: every organization member is in it.',
          'visibility',
        );
      }
      await updateProject(db, project.id, body);
      principalsChanged();
      return toProject(await visibleProject(db, principal, project.id));
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/members',
    projectScope: 'organization',
    operationId: 'listProjectMembers',
    summary: 'Members of a project and their roles',
    tags: ['administration'],
    strict: true,
    params: ProjectParams,
    errors: [403, 404],
    response: { status: 200, description: 'The members', schema: listOf(MemberSchema) },
    handler: async ({ principal, params }) => {
      const project = await visibleProject(db, principal, params.projectId);
      return { object: 'list' as const, data: (await listProjectMembers(db, project.id)).map(toMember) };
    },
  });

  router.add({
    method: 'post',
    path: '/projects/:projectId/members',
    projectScope: 'organization',
    operationId: 'addProjectMember',
    summary: 'Add an organization member to a project, or change their role (project or organization admins)',
    tags: ['administration'],
    strict: true,
    params: ProjectParams,
    body: AddProjectMemberBody,
    errors: [403, 404, 409],
    response: { status: 200, description: 'The membership', schema: MemberSchema },
    handler: async ({ principal, params, body }) => {
      const project = await visibleProject(db, principal, params.projectId);
      requireProjectAdmin(principal, project);
      const member = await findOrganizationMember(db, principal.organizationId, {
        userId: body.user_id,
        email: body.email,
      });
      if (!member) {
        throw notFound(
          `No member '${body.user_id ?? body.email}' in this organization; add them to it first.`,
          'user_not_found',
        );
      }
      await setProjectMemberRole(db, project.id, member.user_id, body.role).catch((err) => {
        throw asRuleConflict(err);
      });
      principalsChanged();
      const added = (await listProjectMembers(db, project.id)).find((m) => m.user_id === member.user_id)!;
      return toMember(added);
    },
  });

  router.add({
    method: 'delete',
    path: '/projects/:projectId/members/:userId',
    projectScope: 'organization',
    operationId: 'removeProjectMember',
    summary: 'Remove a member from a project (project or organization admins); the last admin cannot be removed',
    tags: ['administration'],
    strict: true,
    params: MemberParams,
    errors: [403, 404, 409],
    response: { status: 200, description: 'Removed', schema: ProjectOk },
    handler: async ({ principal, params }) => {
      const project = await visibleProject(db, principal, params.projectId);
      requireProjectAdmin(principal, project);
      await removeProjectMember(db, project.id, params.userId).catch((err) => {
        throw asRuleConflict(err);
      });
      principalsChanged();
      return { object: 'project.membership' as const, project_id: project.id, user_id: params.userId, left: true };
    },
  });

  router.add({
    method: 'post',
    path: '/projects/:projectId/join',
    projectScope: 'organization',
    operationId: 'joinProject',
    summary: 'Join an open project as Editor',
    tags: ['administration'],
    strict: true,
    params: ProjectParams,
    errors: [403, 404, 409],
    response: { status: 200, description: 'The membership', schema: MemberSchema },
    handler: async ({ principal, params }) => {
      const userId = requireUser(principal);
      const project = await visibleProject(db, principal, params.projectId);
      if (project.role) throw conflict('You are already a member of this project.', 'already_a_member');
      if (project.visibility !== 'open') {
        throw forbidden(`This project is ${project.visibility}: an admin of it has to add you.`, 'project_not_open');
      }
      await addProjectMember(db, project.id, userId, 'Editor');
      principalsChanged();
      return toMember((await listProjectMembers(db, project.id)).find((m) => m.user_id === userId)!);
    },
  });

  router.add({
    method: 'post',
    path: '/projects/:projectId/leave',
    projectScope: 'organization',
    operationId: 'leaveProject',
    summary: 'Leave a project; non-members cannot leave the default project and the last admin cannot leave',
    tags: ['administration'],
    strict: true,
    params: ProjectParams,
    errors: [403, 404, 409],
    response: { status: 200, description: 'Left', schema: ProjectOk },
    handler: async ({ principal, params }) => {
      const userId = requireUser(principal);
      const project = await visibleProject(db, principal, params.projectId);
      await removeProjectMember(db, project.id, userId).catch((err) => {
        throw asRuleConflict(err);
      });
      principalsChanged();
      return { object: 'project.membership' as const, project_id: project.id, user_id: userId, left: true };
    },
  });
}
