/**
 * Members of the caller's organization, with the organization roles Admin
 * and Developer. Organization admins add people (by email; a new address
 * becomes a user), change roles and remove members. Removing a member also
 * ends their project memberships and revokes their keys in the
 * organization: nothing they held keeps working.
 */
import { addOrganizationMember, createUser } from '../../db/accounts';
import {
  findOrganizationMember,
  findUserByEmail,
  listOrganizationMembers,
  MembershipRuleError,
  removeOrganizationMember,
} from '../../db/administration';
import type { ApiDeps } from '../deps';
import { conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { AddOrganizationMemberBody, listOf, MemberSchema } from '../schemas/administration';
import { memberView, requireOrganizationAdmin, requireUser } from '../use-cases/administration-access';
import { UserParams } from '../schemas/administration';

export function addOrganizationMemberRoutes(router: ApiRouter, { db, principals }: ApiDeps) {
  router.add({
    method: 'get',
    path: '/organization/members',
    operationId: 'listOrganizationMembers',
    summary: "Members of the caller's organization and their roles",
    tags: ['administration'],
    strict: true,
    errors: [403],
    response: { status: 200, description: 'The members', schema: listOf(MemberSchema) },
    handler: async ({ principal }) => {
      requireUser(principal);
      return {
        object: 'list' as const,
        data: (await listOrganizationMembers(db, principal.organizationId)).map(memberView),
      };
    },
  });

  router.add({
    method: 'post',
    path: '/organization/members',
    operationId: 'addOrganizationMember',
    summary: 'Add a person to the organization by email, or change their role (organization admins)',
    tags: ['administration'],
    strict: true,
    body: AddOrganizationMemberBody,
    errors: [403, 409],
    response: { status: 200, description: 'The membership', schema: MemberSchema },
    handler: async ({ principal, body }) => {
      requireOrganizationAdmin(principal);
      const existing = await findOrganizationMember(db, principal.organizationId, { email: body.email });
      if (existing?.role === 'Admin' && body.role !== 'Admin') await assertAnotherAdmin(principal.organizationId);
      const userId =
        (await findUserByEmail(db, body.email))?.id ??
        (await createUser(db, { email: body.email, name: body.name ?? body.email }));
      await addOrganizationMember(db, principal.organizationId, userId, body.role);
      principals?.drop();
      return memberView((await findOrganizationMember(db, principal.organizationId, { userId }))!);
    },
  });

  router.add({
    method: 'delete',
    path: '/organization/members/:userId',
    operationId: 'removeOrganizationMember',
    summary: 'Remove a person from the organization, its projects and their keys in it (organization admins)',
    tags: ['administration'],
    strict: true,
    params: UserParams,
    errors: [403, 404, 409],
    response: { status: 200, description: 'The removed membership', schema: MemberSchema },
    handler: async ({ principal, params }) => {
      requireOrganizationAdmin(principal);
      const member = await findOrganizationMember(db, principal.organizationId, { userId: params.userId });
      if (!member) throw notFound(`No member '${params.userId}' in this organization.`, 'user_not_found');
      await removeOrganizationMember(db, principal.organizationId, member.user_id).catch((err) => {
        throw err instanceof MembershipRuleError ? conflict(err.message, err.code) : err;
      });
      principals?.drop();
      return memberView(member);
    },
  });

  async function assertAnotherAdmin(organizationId: string) {
    const admins = (await listOrganizationMembers(db, organizationId)).filter((m) => m.role === 'Admin');
    if (admins.length <= 1) {
      throw conflict(
        'The last organization admin cannot be demoted; make another member an admin first.',
        'last_organization_admin',
      );
    }
  }
}
