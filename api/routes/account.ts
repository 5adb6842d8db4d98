import type { ApiRouter } from '../route';
import { WhoamiSchema } from '../schemas/account';

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
