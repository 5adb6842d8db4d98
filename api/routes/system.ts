/**
 * Installation health for operators: GET /system/status, and the self-check
 * workflow that proves work reaches the control and GPU queues.
 */
import { getSelfCheck, listSelfChecks } from '../../db/system';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { listOf, IdParams } from '../schemas/common';
import { CreateSelfCheckBody, ListSelfChecksQuery, SelfCheckSchema, SystemStatusSchema } from '../schemas/system';
import { startSelfCheck, systemStatus } from '../use-cases/system';
import { toSelfCheck } from '../presenters/system';

export function addSystemRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  router.add({
    method: 'get',
    path: '/system/status',
    operationId: 'getSystemStatus',
    summary: 'Database, Temporal and task-queue pollers of this installation',
    tags: ['system'],
    access: 'platform-admin',
    strict: true,
    errors: [403],
    response: { status: 200, description: 'Health of the backing services', schema: SystemStatusSchema },
    handler: () => systemStatus(deps),
  });

  router.add({
    method: 'post',
    path: '/system/self-checks',
    operationId: 'createSelfCheck',
    summary: 'Start a self-check workflow that visits the control queue and GPU queues',
    tags: ['system'],
    access: 'platform-admin',
    strict: true,
    body: CreateSelfCheckBody,
    errors: [403, 503],
    response: { status: 201, description: 'The self-check, running', schema: SelfCheckSchema },
    handler: async ({ body, principal }) => toSelfCheck(await startSelfCheck(deps, principal, body)),
  });

  router.add({
    method: 'get',
    path: '/system/self-checks/:id',
    operationId: 'getSelfCheck',
    summary: 'A self-check and the result of each task-queue probe',
    tags: ['system'],
    access: 'platform-admin',
    strict: true,
    params: IdParams,
    errors: [403, 404],
    response: { status: 200, description: 'The self-check', schema: SelfCheckSchema },
    handler: async ({ params, principal }) => {
      const row = await getSelfCheck(db, principal.projectId, params.id);
      if (!row) throw notFound(`Self-check '${params.id}' not found.`);
      return toSelfCheck(row);
    },
  });

  router.add({
    method: 'get',
    path: '/system/self-checks',
    operationId: 'listSelfChecks',
    summary: 'Recent self-checks of the project, newest first',
    tags: ['system'],
    access: 'platform-admin',
    strict: true,
    query: ListSelfChecksQuery,
    errors: [403],
    response: { status: 200, description: 'Self-checks', schema: listOf(SelfCheckSchema) },
    handler: async ({ query, principal }) => ({
      object: 'list' as const,
      data: (await listSelfChecks(db, principal.projectId, query.limit)).map(toSelfCheck),
    }),
  });
}
