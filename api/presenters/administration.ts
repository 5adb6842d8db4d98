/**
 * How administration's objects are shown: projects, members, invitations and API keys (never a
 * key's secret).
 */
import type { ApiKeyRow, MemberRow, ProjectRow } from '../../db/administration';
import type { InvitationRow } from '../../db/organization-invitations';

export const toProject = (r: ProjectRow) => ({
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

export const toMember = (r: MemberRow) => ({
  object: 'member' as const,
  user_id: r.user_id,
  email: r.email,
  name: r.name,
  role: r.role,
  created_at: r.created_at.toISOString(),
});

/** An API key as every route shows it (never its secret). */
export const toApiKey = (k: ApiKeyRow) => ({
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

export const toInvitation = (i: InvitationRow) => ({
  id: i.id,
  object: 'organization.invitation' as const,
  organization_id: i.organization_id,
  organization_name: i.organization_name,
  email: i.email,
  role: i.role,
  created_at: i.created_at.toISOString(),
});
