import type { Principal } from '../../db/accounts';
import type { ApiRouter } from '../route';
import { WhoamiSchema, WhoamiV3Schema } from '../schemas/account';

export function addAccountRoutes(router: ApiRouter, operationIdSuffix = '') {
  router.add({
    method: 'get',
    path: '/whoami',
    operationId: `whoami${operationIdSuffix}`,
    summary: 'Which key, project and organization authenticate this request',
    tags: ['account'],
    strict: true,
    response: { status: 200, description: 'The calling identity', schema: WhoamiSchema },
    handler: async ({ principal: p }) => ({
      api_key_id: p.apiKeyId,
      organization_id: p.organizationId,
      organization_name: p.organizationName,
      project_id: p.projectId,
      project_name: p.projectName,
      project_slug: p.projectSlug,
      ...(p.userId ? { user_id: p.userId } : {}),
      project_role: p.projectRole,
      organization_role: p.organizationRole,
    }),
  });
}

/**
 * GET /v3/whoami: the typed identity the Python CLI asks for before every command. Gantry's
 * credentials are all project API keys, so `type` is always `project_api_key`.
 */
export function addTypedWhoamiRoute(router: ApiRouter) {
  router.add({
    method: 'get',
    path: '/whoami',
    operationId: 'whoamiTyped',
    summary: 'The calling identity, typed by the kind of credential',
    tags: ['account'],
    strict: true,
    response: { status: 200, description: 'The calling identity', schema: WhoamiV3Schema },
    handler: async ({ principal }) => typedIdentity(principal),
  });
}

function typedIdentity(p: Principal) {
  return {
    type: 'project_api_key' as const,
    api_key: { id: p.apiKeyId },
    organization: { id: p.organizationId, name: p.organizationName },
    project: { id: p.projectId, name: p.projectName, slug: p.projectSlug },
  };
}
