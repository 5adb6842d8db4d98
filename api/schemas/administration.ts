/**
 * Shapes of project, membership and API-key administration. The spec names
 * the roles, visibilities and leave rules but not the routes ("key format,
 * creation, expiry and per-key permissions: not shown"), and the official SDK
 * has no such resource, so these follow the API's own list conventions.
 */
import { z } from 'zod';
import { cursorPageOf, ProjectParams, ResourceId } from './common';

export const ProjectRoleSchema = z.enum(['Admin', 'Editor']);
export const OrganizationRoleSchema = z.enum(['Admin', 'Developer']);
export const VisibilitySchema = z.enum(['open', 'closed', 'private']);

export const ProjectSchema = z
  .object({
    id: z.string(),
    object: z.literal('project'),
    organization_id: z.string(),
    organization_name: z.string(),
    name: z.string(),
    slug: z.string(),
    visibility: VisibilitySchema,
    is_default: z.boolean(),
    created_at: z.string(),
    /** The caller's role; null when they are not a member (an open or closed project, or as organization admin). */
    role: ProjectRoleSchema.nullable(),
  })
  .meta({ id: 'Project' });

export const MemberSchema = z
  .object({
    object: z.literal('member'),
    user_id: z.string(),
    email: z.string(),
    name: z.string(),
    role: z.string(),
    created_at: z.string(),
  })
  .meta({ id: 'Member' });

export const ApiKeySchema = z
  .object({
    id: z.string(),
    object: z.literal('api_key'),
    project_id: z.string(),
    user_id: z.string().nullable(),
    name: z.string(),
    /** The secret's last four characters, to tell keys apart. */
    key_hint: z.string(),
    legacy: z.boolean(),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
  })
  .meta({ id: 'ApiKey' });

export const NewApiKeySchema = ApiKeySchema.extend({
  /** The secret: shown in this response only, never stored. */
  key: z.string(),
}).meta({ id: 'NewApiKey' });

export const AcceptedInvitationSchema = z
  .object({
    object: z.literal('organization.membership'),
    organization_id: z.string(),
    organization_name: z.string(),
    role: OrganizationRoleSchema,
    /** A key of the organization's default project, its secret shown this once; null without a default project. */
    api_key: NewApiKeySchema.nullable(),
  })
  .meta({ id: 'AcceptedInvitation' });

export const listOf = <T extends z.ZodType>(item: T) => z.object({ object: z.literal('list'), data: z.array(item) });

export const slugField = z
  .string()
  .regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    'lowercase letters, digits and hyphens, 1 to 63, not starting or ending with a hyphen',
  );

export const UserParams = z.object({ userId: z.string().min(1).max(128) });

export const MemberParams = ProjectParams.extend({ userId: z.string().min(1).max(128) });
export const ProjectOk = z.object({
  object: z.literal('project.membership'),
  project_id: z.string(),
  user_id: z.string(),
  left: z.boolean(),
});

/** A name people give (a project, a key, a member): trimmed, 1 to 128 characters. */
const GivenName = z.string().trim().min(1).max(128);

/** GET /projects: pages as the Python CLI asks for them (`limit`, and `after` the last id of the page before). */
export const ListProjectsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).optional(),
  // An id of the list (route: `after: no project '' in this list` for any other, the empty one too).
  after: z.string().min(1).max(128).optional(),
});
export const ProjectListSchema = cursorPageOf(ProjectSchema);
export const CreateProjectBody = z.object({
  name: GivenName,
  slug: slugField,
  visibility: VisibilitySchema.default('private'),
});
export const UpdateProjectBody = z.object({ name: GivenName.optional(), visibility: VisibilitySchema.optional() });
/** An email address; the document states zod's own pattern (its `format: email` alone admits more). */
const Email = z.email().meta({ pattern: z.regexes.email.source });
export const AddProjectMemberBody = z
  .object({ user_id: z.string().min(1).optional(), email: Email.optional(), role: ProjectRoleSchema })
  .refine((b) => (b.user_id === undefined) !== (b.email === undefined), {
    message: 'Give exactly one of user_id and email.',
    path: ['user_id'],
  })
  .meta({ oneOf: [{ required: ['user_id'] }, { required: ['email'] }] });

/** A member's new role, the member named by email (people join by invitation: InviteBody). */
export const OrganizationMemberRoleBody = z.object({
  email: Email,
  role: OrganizationRoleSchema,
});

export const InviteBody = z.object({ email: Email, role: OrganizationRoleSchema });
export const InvitationParams = z.object({ invitationId: ResourceId });

/** The same for every address: nothing in it says whether the address belongs to a user. */
export const InvitationSchema = z
  .object({
    id: z.string(),
    object: z.literal('organization.invitation'),
    organization_id: z.string(),
    organization_name: z.string(),
    email: z.string(),
    role: OrganizationRoleSchema,
    created_at: z.string(),
  })
  .meta({ id: 'OrganizationInvitation' });

export const CreateApiKeyBody = z.object({ name: GivenName, project_id: ResourceId.optional() });
export const ApiKeyParams = z.object({ keyId: ResourceId });
