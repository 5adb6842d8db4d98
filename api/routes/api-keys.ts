/**
 * API keys: list, create (the secret is shown once), revoke, and the legacy
 * key's regeneration (spec: Authentication, "legacy keys can be regenerated
 * by any admin or editor of the default project"). The legacy key is shared,
 * so it carries no user: it is the default project's key without anyone's
 * roles, and cannot administer (db/administration.ts regenerateLegacyKey).
 *
 * A revoked key is refused from the next request on: the revoking process
 * drops its principal cache before answering, and every other API and
 * gateway process drops its own when PostgreSQL's notification arrives
 * (db/principal-cache.ts).
 */
import { createApiKey, revokeApiKey } from '../../db/accounts';
import {
  defaultProjectOf,
  findApiKey,
  findProjectForUser,
  listApiKeys,
  regenerateLegacyKey,
} from '../../db/administration';
import type { ApiDeps } from '../deps';
import { forbidden, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { ApiKeyParams, ApiKeySchema, CreateApiKeyBody, listOf, NewApiKeySchema } from '../schemas/administration';
import { requireUser, visibleProject } from '../use-cases/administration-access';
import { toApiKey } from '../presenters/administration';

export function addApiKeyRoutes(router: ApiRouter, { db, principals }: ApiDeps) {
  const isAdminOf = (role: string | null, orgRole: string | null) => role === 'Admin' || orgRole === 'Admin';

  router.add({
    method: 'get',
    path: '/api-keys',
    operationId: 'listApiKeys',
    summary: "Keys of the calling key's project: all of them for its admins, the caller's own otherwise",
    tags: ['administration'],
    strict: true,
    response: { status: 200, description: 'The keys, never their secrets', schema: listOf(ApiKeySchema) },
    handler: async ({ principal: p }) => {
      const everyone = isAdminOf(p.projectRole, p.organizationRole);
      if (!everyone && !p.userId) {
        const own = await findApiKey(db, p.apiKeyId);
        return { object: 'list' as const, data: own ? [toApiKey(own)] : [] };
      }
      const rows = await listApiKeys(db, p.projectId, everyone ? null : p.userId);
      return { object: 'list' as const, data: rows.map(toApiKey) };
    },
  });

  router.add({
    method: 'post',
    path: '/api-keys',
    operationId: 'createApiKey',
    summary: 'Create a key for yourself in a project you belong to (default: the calling key’s project)',
    tags: ['administration'],
    strict: true,
    body: CreateApiKeyBody,
    errors: [403, 404],
    response: { status: 201, description: 'The key, with its secret shown this once', schema: NewApiKeySchema },
    handler: async ({ principal: p, body }) => {
      const userId = requireUser(p);
      const project = await visibleProject(db, p, body.project_id ?? p.projectId);
      // Everyone in the organization belongs to its default project without a membership row.
      if (!project.role && !(project.is_default && p.organizationRole)) {
        throw forbidden('Only members of a project can make keys for it.', 'project_member_required');
      }
      const { id, secret } = await createApiKey(db, { projectId: project.id, userId, name: body.name });
      return { ...toApiKey((await findApiKey(db, id))!), key: secret };
    },
  });

  router.add({
    method: 'delete',
    path: '/api-keys/:keyId',
    operationId: 'revokeApiKey',
    summary: 'Revoke a key (your own, or any key of a project you administer); it is refused from the next request on',
    tags: ['administration'],
    strict: true,
    params: ApiKeyParams,
    errors: [403, 404],
    response: { status: 200, description: 'The revoked key', schema: ApiKeySchema },
    handler: async ({ principal: p, params, req }) => {
      const key = await findApiKey(db, params.keyId);
      if (!key) return notFoundKey(params.keyId);
      const project = await findProjectForUser(db, p.organizationId, key.project_id, p.userId ?? '');
      if (!project) return notFoundKey(params.keyId); // another organization's key
      const own = key.id === p.apiKeyId || (p.userId !== null && key.user_id === p.userId);
      if (!own && !(p.userId && isAdminOf(project.role, p.organizationRole))) {
        throw forbidden('Only its owner or an admin of its project can revoke this key.', 'project_admin_required');
      }
      await revokeApiKey(db, key.id);
      principals?.drop();
      req.log?.info({ revokedKeyId: key.id }, 'API key revoked');
      return toApiKey((await findApiKey(db, key.id))!);
    },
  });

  router.add({
    method: 'post',
    path: '/api-keys/legacy/regenerate',
    operationId: 'regenerateLegacyApiKey',
    summary: "Replace the organization's legacy key (admins and editors of the default project)",
    tags: ['administration'],
    strict: true,
    errors: [403],
    response: {
      status: 201,
      description: 'The new legacy key, with its secret shown this once',
      schema: NewApiKeySchema,
    },
    handler: async ({ principal: p, req }) => {
      const userId = requireUser(p);
      const defaultProject = await defaultProjectOf(db, p.organizationId);
      const membership = defaultProject ? await findProjectForUser(db, p.organizationId, defaultProject, userId) : null;
      if (!defaultProject || !membership?.role) {
        throw forbidden(
          'Only an admin or editor of the default project can regenerate the legacy key.',
          'default_project_role_required',
        );
      }
      // The new key carries no user (it is shared): who made it is in this log line only.
      const { id, secret, revoked } = await regenerateLegacyKey(db, defaultProject);
      principals?.drop();
      req.log?.info({ newKeyId: id, revokedKeyIds: revoked, regeneratedBy: userId }, 'legacy API key regenerated');
      return { ...toApiKey((await findApiKey(db, id))!), key: secret };
    },
  });
}

function notFoundKey(keyId: string): never {
  throw notFound(`No API key '${keyId}'.`, 'api_key_not_found');
}
