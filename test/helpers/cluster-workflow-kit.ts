/**
 * What the cluster workflow's time-skipping tests share (test/workflows/cluster-*-decisions): a
 * cluster run with its control and GPU workers over the activity doubles of cluster-doubles.ts,
 * and the waits and checks each test reads it by.
 */
import assert from 'node:assert/strict';
import type { WorkflowHandle } from '@temporalio/client';
import type { Worker, WorkerOptions } from '@temporalio/worker';
import { CLUSTER_MESSAGES, clusterWorkflowId, type ClusterState } from '../../shared/clusters';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../../shared/task-queues';
import type { cluster as clusterWorkflow } from '../../workflows/clusters';
import { ClusterActivityDoubles, acceleratorHostDouble, clusterInput } from './cluster-doubles';
import { historyLengths as historyLengthsOf, inTime, runWorkers, until, type WorkflowTestEnv } from './workflow-env';

export type GpuWorkerOptions = Pick<WorkerOptions, 'maxConcurrentActivityTaskExecutions'>;

/** A promise the test resolves when it lets a held activity go on. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

// How long a probe waits for a GPU worker before its queue counts as unserved. The test server
// does not skip time while an activity task waits for a poller, so this wait passes in real time
// at every probe of a simulated outage: at 1 s it was most of the outage tests' run time.
export const QUEUE_WAIT_SECONDS = 0.1;

/** The cluster's lifecycle events for `reason`. */
export const lifecycleEvents = (s: ClusterState | undefined, reason: string) =>
  (s?.node_lifecycle_events ?? []).filter((e) => e.reason === reason);

/** The cluster runs of a test file, on its workflow test server `t`. */
export function clusterWorkflowKit(t: WorkflowTestEnv) {
  /** The GPU workers of the current test (what the poller-list double reads). */
  let gpuHosts: Worker[] = [];

  /** A worker on the GPU queue, as an accelerator host runs one. */
  async function gpuHost(doubles: ClusterActivityDoubles, options?: GpuWorkerOptions): Promise<Worker> {
    const w = await t.worker(gpuTaskQueue('H100_SXM'), { ...doubles.activities(), ...acceleratorHostDouble }, options);
    gpuHosts.push(w);
    return w;
  }

  async function withCluster(
    id: string,
    opts: Parameters<typeof clusterInput>[1] & {
      gpuWorker?: boolean;
      gpuWorkerOptions?: GpuWorkerOptions;
      workflowTaskTimeout?: string;
    },
    body: (ctx: {
      doubles: ClusterActivityDoubles;
      handle: WorkflowHandle<typeof clusterWorkflow>;
      gpu?: Worker;
    }) => Promise<void>,
  ) {
    const doubles = new ClusterActivityDoubles();
    const activities = { ...doubles.activities(), ...acceleratorHostDouble };
    const control = await t.worker(CONTROL_TASK_QUEUE, activities);
    gpuHosts = [];
    // What Temporal's poller list would say: some GPU worker of this test is running.
    doubles.queuePolled = () => gpuHosts.some((w) => w.getState() === 'RUNNING');
    const gpu = opts.gpuWorker === false ? undefined : await gpuHost(doubles, opts.gpuWorkerOptions);
    await runWorkers(gpu ? [control, gpu] : [control], async () => {
      const handle = await t.env.client.workflow.start<typeof clusterWorkflow>('cluster', {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: clusterWorkflowId(id),
        args: [clusterInput(id, opts)],
        workflowTaskTimeout: opts.workflowTaskTimeout,
      });
      t.watch(handle);
      await body({ doubles, handle, gpu });
    });
  }

  const ready = (d: ClusterActivityDoubles) =>
    until(
      () => d.latest,
      (s) => s?.phase === 'CLUSTER_PHASE_READY',
      'the cluster to be Ready',
    );

  /**
   * The run has nothing in flight: by its history, its last workflow task completed and every
   * activity it scheduled has closed. (Read from the history: the test server's describe lists no
   * pending workflow task.) Time skipping is locked between advances, so from then on it does
   * nothing until the test moves the clock: what it has done is what it decided.
   */
  const idle = (handle: WorkflowHandle) =>
    until(
      async () => (await handle.fetchHistory()).events ?? [],
      (events) => {
        const tasks = events.filter(
          (e) =>
            e.workflowTaskScheduledEventAttributes ||
            e.workflowTaskStartedEventAttributes ||
            e.workflowTaskCompletedEventAttributes ||
            e.workflowTaskFailedEventAttributes ||
            e.workflowTaskTimedOutEventAttributes,
        );
        const open = new Set(
          events.filter((e) => e.activityTaskScheduledEventAttributes).map((e) => String(e.eventId)),
        );
        for (const e of events) {
          const closed =
            e.activityTaskCompletedEventAttributes ??
            e.activityTaskFailedEventAttributes ??
            e.activityTaskTimedOutEventAttributes ??
            e.activityTaskCanceledEventAttributes;
          if (closed) open.delete(String(closed.scheduledEventId));
        }
        return Boolean(tasks.at(-1)?.workflowTaskCompletedEventAttributes) && open.size === 0;
      },
      `${handle.workflowId} to have nothing in flight`,
    );

  /** Deletes the cluster and checks that it ends with nothing of it left held. */
  async function deleteAndCheck(handle: WorkflowHandle<typeof clusterWorkflow>, doubles: ClusterActivityDoubles) {
    const deleting = handle.executeUpdate(CLUSTER_MESSAGES.delete, { args: [{ reason: 'test over' }] });
    await inTime(deleting, 45_000, 'the delete update', handle);
    assert.equal(await t.finished(handle), 'deleted');
    assert.deepEqual([...doubles.live], [], 'every node is released');
  }

  const historyLengths = (handle: WorkflowHandle) => historyLengthsOf(t.env, handle);

  return { withCluster, gpuHost, ready, idle, deleteAndCheck, historyLengths };
}
