/**
 * Members of the caller's organization, with the organization roles Admin
 * and Developer, and how people join it. Organization admins invite an email
 * address; its owner accepts with a key of their own (GET /invitations, POST
 * /invitations/{id}/accept) and gets a key of the default project. An
 * invitation answers the same for every address and touches no user, so an
 * admin can neither learn who has an account here (nor their name) nor make
 * anyone a member without their consent. Admins also change members' roles
 * and remove members. Removing a member also ends their project memberships
 * and revokes their keys in the organization: nothing they held keeps working.
 */
import { addOrganizationMember } from '../../db/accounts';
import {
  findApiKey,
  findOrganizationMember,
  listOrganizationMembers,
  MembershipRuleError,
  removeOrganizationMember,
} from '../../db/administration';
import {
  acceptInvitation,
  declineInvitation,
  inviteToOrganization,
  listInvitationsOfUser,
  listOrganizationInvitations,
  withdrawInvitation,
} from '../../db/organization-invitations';
import type { ApiDeps } from '../deps';
import { conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  AcceptedInvitationSchema,
  InvitationParams,
  InvitationSchema,
  InviteBody,
  listOf,
  MemberSchema,
  OrganizationMemberRoleBody,
  UserParams,
} from '../schemas/administration';
import { requireOrganizationAdmin, requireUser } from '../use-cases/administration-access';
import { toInvitation, toApiKey, toMember } from '../presenters/administration';

function notFoundInvitation(invitationId: string): never {
  throw notFound(`No invitation '${invitationId}'.`, 'invitation_not_found');
}

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
        data: (await listOrganizationMembers(db, principal.organizationId)).map(toMember),
      };
    },
  });

  router.add({
    method: 'post',
    path: '/organization/members',
    operationId: 'setOrganizationMemberRole',
    summary: "Change a member's role, the member named by email (organization admins; people join by invitation)",
    tags: ['administration'],
    strict: true,
    body: OrganizationMemberRoleBody,
    errors: [403, 404, 409],
    response: { status: 200, description: 'The membership', schema: MemberSchema },
    handler: async ({ principal, body }) => {
      requireOrganizationAdmin(principal);
      const member = await findOrganizationMember(db, principal.organizationId, { email: body.email });
      // The same answer for every address outside the organization, whether or not it is a user's.
      if (!member) {
        throw notFound(
          `No member '${body.email}' in this organization; invite them with POST /v1/organization/invitations.`,
          'member_not_found',
        );
      }
      if (member.role === 'Admin' && body.role !== 'Admin') await assertAnotherAdmin(principal.organizationId);
      await addOrganizationMember(db, principal.organizationId, member.user_id, body.role);
      principals?.drop();
      return toMember((await findOrganizationMember(db, principal.organizationId, { userId: member.user_id }))!);
    },
  });

  router.add({
    method: 'post',
    path: '/organization/invitations',
    operationId: 'inviteToOrganization',
    summary:
      'Invite an email address into the organization; its owner accepts with their own key (organization admins)',
    tags: ['administration'],
    strict: true,
    body: InviteBody,
    errors: [403, 409],
    response: {
      status: 201,
      description: 'The pending invitation (inviting an address again changes its role)',
      schema: InvitationSchema,
    },
    handler: async ({ principal, body }) => {
      const userId = requireOrganizationAdmin(principal);
      if (await findOrganizationMember(db, principal.organizationId, { email: body.email })) {
        throw conflict(`'${body.email}' is a member already; change their role instead.`, 'already_a_member');
      }
      return toInvitation(
        await inviteToOrganization(db, {
          organizationId: principal.organizationId,
          email: body.email,
          role: body.role,
          invitedBy: userId,
        }),
      );
    },
  });

  router.add({
    method: 'get',
    path: '/organization/invitations',
    operationId: 'listOrganizationInvitations',
    summary: "The organization's pending invitations (organization admins)",
    tags: ['administration'],
    strict: true,
    errors: [403],
    response: { status: 200, description: 'The invitations', schema: listOf(InvitationSchema) },
    handler: async ({ principal }) => {
      requireOrganizationAdmin(principal);
      const rows = await listOrganizationInvitations(db, principal.organizationId);
      return { object: 'list' as const, data: rows.map(toInvitation) };
    },
  });

  router.add({
    method: 'delete',
    path: '/organization/invitations/:invitationId',
    operationId: 'withdrawOrganizationInvitation',
    summary: 'Withdraw a pending invitation (organization admins)',
    tags: ['administration'],
    strict: true,
    params: InvitationParams,
    errors: [403, 404],
    response: { status: 200, description: 'The withdrawn invitation', schema: InvitationSchema },
    handler: async ({ principal, params }) => {
      requireOrganizationAdmin(principal);
      const withdrawn = await withdrawInvitation(db, principal.organizationId, params.invitationId);
      if (!withdrawn) notFoundInvitation(params.invitationId);
      return toInvitation(withdrawn);
    },
  });

  router.add({
    method: 'get',
    path: '/invitations',
    operationId: 'listMyInvitations',
    summary: "Invitations addressed to the calling key's user, from any organization",
    tags: ['administration'],
    strict: true,
    errors: [403],
    response: { status: 200, description: 'The invitations', schema: listOf(InvitationSchema) },
    handler: async ({ principal }) => {
      const rows = await listInvitationsOfUser(db, requireUser(principal));
      return { object: 'list' as const, data: rows.map(toInvitation) };
    },
  });

  router.add({
    method: 'post',
    path: '/invitations/:invitationId/accept',
    operationId: 'acceptInvitation',
    summary: "Join the inviting organization with the invitation's role; answers a key of its default project",
    tags: ['administration'],
    strict: true,
    params: InvitationParams,
    errors: [403, 404],
    response: {
      status: 201,
      description: 'The membership, with a key of the default project shown this once',
      schema: AcceptedInvitationSchema,
    },
    handler: async ({ principal, params, req }) => {
      const userId = requireUser(principal);
      const accepted = await acceptInvitation(db, userId, params.invitationId);
      if (!accepted) notFoundInvitation(params.invitationId);
      principals?.drop();
      const { invitation, key } = accepted;
      req.log?.info({ organizationId: invitation.organization_id, userId }, 'organization invitation accepted');
      const keyRow = key && (await findApiKey(db, key.id));
      return {
        object: 'organization.membership' as const,
        organization_id: invitation.organization_id,
        organization_name: invitation.organization_name,
        role: invitation.role,
        api_key: key && keyRow ? { ...toApiKey(keyRow), key: key.secret } : null,
      };
    },
  });

  router.add({
    method: 'delete',
    path: '/invitations/:invitationId',
    operationId: 'declineInvitation',
    summary: 'Decline an invitation addressed to you',
    tags: ['administration'],
    strict: true,
    params: InvitationParams,
    errors: [403, 404],
    response: { status: 200, description: 'The declined invitation', schema: InvitationSchema },
    handler: async ({ principal, params }) => {
      const declined = await declineInvitation(db, requireUser(principal), params.invitationId);
      if (!declined) notFoundInvitation(params.invitationId);
      return toInvitation(declined);
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
      return toMember(member);
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
