/**
 * Installation health for operators: the status of the backing services and task-queue pollers,
 * and the self-check workflow that proves work reaches the control and GPU queues.
 */
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { deleteSelfCheck, getSelfCheck, insertSelfCheck, type SelfCheckRow } from '../../db/system';
import { newId } from '../../platform/ids';
import { describeTaskQueuePollers, type QueuePollers } from '../../platform/temporal';
import { GPU_TYPES, type GpuType } from '../../shared/gpu-types';
import { SELF_CHECK_RESOURCE_TYPE, selfCheckWorkflowId, type SelfCheckInput } from '../../shared/self-check';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../../shared/task-queues';
import { systemSelfCheck } from '../../workflows/system';
import type { ApiDeps } from '../deps';
import type { CreateSelfCheckBody } from '../schemas/system';
import { startResourceWorkflowOrUndo, TEMPORAL_CALL_DEADLINE_MS } from '../workflows';

/** Bounds on calls to Temporal made inside a request, so an outage is a prompt 503, not a hang. */
const STATUS_DEADLINE_MS = 3_000;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Database, Temporal and the task queues' pollers: `ok` when work can be started and picked up. */
export async function systemStatus(deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>) {
  const { db, temporal, config } = deps;
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
}

/** Starts a self-check of the control queue and the GPU queues asked (by default those with a live worker); its row. */
export async function startSelfCheck(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  body: z.infer<typeof CreateSelfCheckBody>,
): Promise<SelfCheckRow> {
  const { db, temporal, config } = deps;
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
  return (await getSelfCheck(db, principal.projectId, id))!;
}
