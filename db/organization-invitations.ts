/**
 * Invitations into an organization (migration 037). An organization admin
 * invites an email address; the person who owns that address on this
 * installation accepts (or declines) with a key of their own. Until then the
 * invitation is only an address: it does not look up, name or change any user,
 * so an admin learns nothing about who has an account here, and nobody is made
 * a member of an organization they did not agree to join.
 */
import { newId } from '../platform/ids';
import { createApiKey, type OrganizationRole } from './accounts';
import { defaultProjectOf } from './administration';
import { withTransaction, type Db, type Queryable } from './pool';

export interface InvitationRow {
  id: string;
  organization_id: string;
  organization_name: string;
  email: string;
  role: OrganizationRole;
  created_at: Date;
}

const SELECT = `SELECT i.id, i.organization_id, o.name AS organization_name, i.email, i.role, i.created_at
                  FROM organization_invitations i JOIN organizations o ON o.id = i.organization_id`;

/** Invites `email` (or changes the role of its pending invitation); answers the invitation. */
export async function inviteToOrganization(
  db: Queryable,
  i: { organizationId: string; email: string; role: OrganizationRole; invitedBy: string },
): Promise<InvitationRow> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO organization_invitations (id, organization_id, email, role, invited_by)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (organization_id, lower(email))
       DO UPDATE SET role = EXCLUDED.role, invited_by = EXCLUDED.invited_by
     RETURNING id`,
    [newId('inv'), i.organizationId, i.email, i.role, i.invitedBy],
  );
  return (await db.query<InvitationRow>(`${SELECT} WHERE i.id = $1`, [rows[0].id])).rows[0];
}

/** An organization's pending invitations, oldest first. */
export async function listOrganizationInvitations(db: Queryable, organizationId: string): Promise<InvitationRow[]> {
  const { rows } = await db.query<InvitationRow>(`${SELECT} WHERE i.organization_id = $1 ORDER BY i.created_at, i.id`, [
    organizationId,
  ]);
  return rows;
}

/** The pending invitations addressed to a user's email, oldest first. */
export async function listInvitationsOfUser(db: Queryable, userId: string): Promise<InvitationRow[]> {
  const { rows } = await db.query<InvitationRow>(
    `${SELECT} JOIN users u ON lower(u.email) = lower(i.email) WHERE u.id = $1 ORDER BY i.created_at, i.id`,
    [userId],
  );
  return rows;
}

/** Removes an invitation of the organization (withdrawn by an admin); null when it has none by that id. */
export async function withdrawInvitation(
  db: Queryable,
  organizationId: string,
  invitationId: string,
): Promise<InvitationRow | null> {
  const found = (await listOrganizationInvitations(db, organizationId)).find((i) => i.id === invitationId);
  if (!found) return null;
  await db.query('DELETE FROM organization_invitations WHERE id = $1', [invitationId]);
  return found;
}

/** Removes an invitation addressed to the user (declined); null when they have none by that id. */
export async function declineInvitation(db: Queryable, userId: string, invitationId: string) {
  const found = (await listInvitationsOfUser(db, userId)).find((i) => i.id === invitationId);
  if (!found) return null;
  await db.query('DELETE FROM organization_invitations WHERE id = $1', [invitationId]);
  return found;
}

/**
 * The user accepts an invitation addressed to their email: it is used up, they become a member
 * with its role (an existing membership keeps its role), and they get a key of the
 * organization's default project, which every member belongs to (none when the organization
 * has no default project). Null when no invitation by that id is addressed to them.
 */
export async function acceptInvitation(
  db: Db,
  userId: string,
  invitationId: string,
): Promise<{ invitation: InvitationRow; key: { id: string; secret: string } | null } | null> {
  return withTransaction(db, async (tx) => {
    const invitation = (await listInvitationsOfUser(tx, userId)).find((i) => i.id === invitationId);
    if (!invitation) return null;
    // The delete decides between two accepts at once: only one of them removes the row.
    const used = await tx.query('DELETE FROM organization_invitations WHERE id = $1', [invitationId]);
    if (!used.rowCount) return null;
    await tx.query(
      `INSERT INTO organization_members (organization_id, user_id, role) VALUES ($1, $2, $3)
       ON CONFLICT (organization_id, user_id) DO NOTHING`,
      [invitation.organization_id, userId, invitation.role],
    );
    const defaultProject = await defaultProjectOf(tx, invitation.organization_id);
    const key = defaultProject
      ? await createApiKey(tx, { projectId: defaultProject, userId, name: 'accepted invitation' })
      : null;
    return { invitation, key };
  });
}
