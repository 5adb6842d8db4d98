/**
 * Installation health for operators: GET /system/status, and the self-check
 * workflow that proves work reaches the control and GPU queues.
 */
import { GPU_TYPES, type GpuType } from '../../shared/gpu-types';
import { newId } from '../../platform/ids';
import { SELF_CHECK_RESOURCE_TYPE, selfCheckWorkflowId, type SelfCheckInput } from '../../shared/self-check';
import { describeTaskQueuePollers, type QueuePollers } from '../../platform/temporal';
import { deleteSelfCheck, getSelfCheck, insertSelfCheck, listSelfChecks, type SelfCheckRow } from '../../db/system';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../../shared/task-queues';
import { systemSelfCheck } from '../../workflows/system';
import type { ApiDeps } from '../deps';
import { startResourceWorkflowOrUndo, TEMPORAL_CALL_DEADLINE_MS } from '../workflows';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { listOf, IdParams } from '../schemas/common';
import { CreateSelfCheckBody, ListSelfChecksQuery, SelfCheckSchema, SystemStatusSchema } from '../schemas/system';

function toSelfCheck(row: SelfCheckRow) {
  return {
    id: row.id,
    object: 'system.self_check' as const,
    status: row.status,
    workflow_id: row.workflow_id,
    created_at: new Date(row.created_at).toISOString(),
    completed_at: row.completed_at ? new Date(row.completed_at).toISOString() : null,
    probes: row.probes.map((p) => ({ ...p, updated_at: new Date(p.updated_at).toISOString() })),
  };
}

/** Bounds on calls to Temporal made inside a request, so an outage is a prompt 503, not a hang. */
const STATUS_DEADLINE_MS = 3_000;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

export function addSystemRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal, config } = deps;

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
    handler: async () => {
      const database: { ok: boolean; latency_ms: number | null; migrations: string[]; error?: string } = {
        ok: false,
        latency_ms: null,
        migrations: [],
      };
      try {
        const t0 = performance.now();
        const { rows } = await db.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY version');
        database.latency_ms = Math.round((performance.now() - t0) * 100) / 100;
        database.migrations = rows.map((r) => r.name);
        database.ok = true;
      } catch (err) {
        database.error = errorText(err);
      }
      const temporalStatus: { ok: boolean; address: string; namespace: string; error?: string } = {
        ok: false,
        address: config.temporal.address,
        namespace: config.temporal.namespace,
      };
      let taskQueues: QueuePollers[] = [];
      try {
        // A status page must answer even when Temporal does not: bound the wait.
        taskQueues = await temporal.connection.withDeadline(Date.now() + STATUS_DEADLINE_MS, () =>
          Promise.all(
            [CONTROL_TASK_QUEUE, ...GPU_TYPES.map(gpuTaskQueue)].map((q) => describeTaskQueuePollers(temporal, q)),
          ),
        );
        temporalStatus.ok = true;
      } catch (err) {
        temporalStatus.error = errorText(err);
      }
      const control = taskQueues.find((q) => q.name === CONTROL_TASK_QUEUE);
      const healthy = database.ok && temporalStatus.ok && !!control && control.workflow_pollers > 0;
      return {
        status: healthy ? ('ok' as const) : ('degraded' as const),
        database,
        temporal: temporalStatus,
        task_queues: taskQueues,
      };
    },
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
    handler: async ({ body, principal }) => {
      let gpuTypes: GpuType[];
      if (body.gpu_types) {
        gpuTypes = [...new Set(body.gpu_types)];
      } else {
        // Default: the GPU queues that have a live worker right now.
        const queues = await temporal.connection.withDeadline(Date.now() + TEMPORAL_CALL_DEADLINE_MS, () =>
          Promise.all(GPU_TYPES.map((t) => describeTaskQueuePollers(temporal, gpuTaskQueue(t)))),
        );
        gpuTypes = GPU_TYPES.filter((_, i) => queues[i].activity_pollers > 0);
      }
      const id = newId('sc');
      const workflowId = selfCheckWorkflowId(id);
      const queues = [CONTROL_TASK_QUEUE, ...gpuTypes.map(gpuTaskQueue)];
      await insertSelfCheck(db, { id, projectId: principal.projectId, workflowId, taskQueues: queues });
      const input: SelfCheckInput = {
        checkId: id,
        projectId: principal.projectId,
        gpuTypes,
        queueWaitSeconds: config.gpuQueueWaitSeconds,
      };
      await startResourceWorkflowOrUndo(
        temporal,
        {
          workflow: systemSelfCheck,
          workflowId,
          args: [input],
          projectId: principal.projectId,
          resourceType: SELF_CHECK_RESOURCE_TYPE,
          resourceId: id,
          status: 'running',
          summary: `Self-check ${id}: ${queues.join(', ')}`,
          details: [
            `Started by API key \`${principal.apiKeyId}\` in project \`${principal.projectSlug}\`.`,
            `GPU queues wait up to ${config.gpuQueueWaitSeconds}s for a worker before reporting \`no_worker\`.`,
          ].join('\n\n'),
        },
        () => deleteSelfCheck(db, id), // no workflow, no row: nothing dangles
      );
      const row = await getSelfCheck(db, principal.projectId, id);
      return toSelfCheck(row!);
    },
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
