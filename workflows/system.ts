/**
 * systemSelfCheck: visits the control queue and each requested gpu.<type>
 * queue, and records what answered in PostgreSQL. A GPU queue with no worker
 * is reported by its schedule-to-start timeout rather than waited on forever.
 * It is the pattern other workflows follow: readable id, search attributes,
 * current details for the UI, activities that own all I/O.
 */
import { proxyActivities, setCurrentDetails, upsertSearchAttributes } from '@temporalio/workflow';
import { failureMessage, isScheduleToStart } from './failures';
import type { SystemActivities } from '../activities/system';
import type { AcceleratorActivities } from '../activities/accelerator';
import type { GpuType } from '../shared/gpu-types';
import type { SelfCheckInput, SelfCheckOutcome } from '../shared/self-check';
import { statusSearchAttributes } from '../shared/search-attributes';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../shared/task-queues';

const control = proxyActivities<SystemActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds', maximumAttempts: 20 },
});

async function probeGpuQueue(input: SelfCheckInput, gpuType: GpuType): Promise<void> {
  const taskQueue = gpuTaskQueue(gpuType);
  const gpu = proxyActivities<AcceleratorActivities>({
    taskQueue,
    // The bound on "is anyone serving this queue?"; not retried by Temporal.
    scheduleToStartTimeout: `${input.queueWaitSeconds} seconds`,
    startToCloseTimeout: '1 minute',
    retry: { maximumAttempts: 3 },
  });
  const startedAt = Date.now();
  try {
    const host = await gpu.describeAcceleratorHost.executeWithOptions({ summary: `probe ${taskQueue}` }, [{ gpuType }]);
    await control.recordSelfCheckProbe({
      checkId: input.checkId,
      taskQueue,
      status: 'ok',
      host,
      latencyMs: Date.now() - startedAt,
    });
  } catch (err) {
    const noWorker = isScheduleToStart(err);
    await control.recordSelfCheckProbe({
      checkId: input.checkId,
      taskQueue,
      status: noWorker ? 'no_worker' : 'failed',
      detail: noWorker
        ? `No worker picked up work on ${taskQueue} within ${input.queueWaitSeconds}s. Start a GPU worker with GANTRY_GPU_TYPES=${gpuType} on a host that has it.`
        : `Probe failed: ${failureMessage(err)}`,
    });
  }
}

export async function systemSelfCheck(input: SelfCheckInput): Promise<SelfCheckOutcome> {
  const queues = [CONTROL_TASK_QUEUE, ...input.gpuTypes.map(gpuTaskQueue)];
  setCurrentDetails(`Probing task queues: ${queues.join(', ')}`);

  const startedAt = Date.now();
  const controlHost = await control.describeControlHost.executeWithOptions({ summary: 'probe control' }, []);
  await control.recordSelfCheckProbe({
    checkId: input.checkId,
    taskQueue: CONTROL_TASK_QUEUE,
    status: 'ok',
    host: controlHost,
    latencyMs: Date.now() - startedAt,
  });

  await Promise.all(input.gpuTypes.map((t) => probeGpuQueue(input, t)));

  const outcome = await control.completeSelfCheck({ checkId: input.checkId });
  upsertSearchAttributes(statusSearchAttributes(outcome.status));
  setCurrentDetails(
    `${outcome.status.toUpperCase()}: ${outcome.probes.map((p) => `${p.task_queue}=${p.status}`).join(', ')}`,
  );
  return outcome;
}
