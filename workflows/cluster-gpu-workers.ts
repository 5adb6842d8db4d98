/**
 * Waiting for GPU workers, for one cluster: node tests run on the GPU task
 * queue of the cluster's accelerator type, and when nobody serves that queue
 * the cluster says so once, waits on one shared probe that backs off, and
 * (during bring-up) hands the run over to a new one so that an outage of any
 * length keeps each history small. A queue that hosts poll but whose slots are
 * all taken is busy, not unserved. Workflow code: deterministic.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
} from '@temporalio/workflow';
import { isScheduleToStart } from './failures';
import { continueAsNewWhenQuiet } from './entity-kit';
import { PATCHES } from './patches';
import type { AcceleratorActivities } from '../activities/accelerator';
import type { ClusterNodeTestActivities } from '../activities/clusters';
import { clusterControl as control } from './cluster-activities';
import { FINAL_REMEDIATION_STATES } from '../shared/clusters';
import { lifecycleEvent, nowIso } from '../shared/cluster-state';
import { gpuTaskQueue } from '../shared/task-queues';
import type { ClusterProjection, ClusterRun, ClusterWorkflow } from './cluster-run';

/**
 * A node test whose activity gave up (its retries spent, or refused) is
 * state, not the end of the cluster: undefined, for the caller to record.
 * Deletion and cancellation still stop the caller. (Before this patch the
 * failure failed the whole run.)
 */
export function nodeTestUnavailable(err: unknown): undefined {
  if (!(err instanceof ActivityFailure) || !patched(PATCHES.nodeTestFailureIsState.id)) throw err;
  return undefined;
}

/** The shared probe of an unserved GPU queue waits this long first, then twice as long each time, up to the cap. */
const PROBE_FIRST_WAIT_MS = 30_000;
const PROBE_MAX_WAIT_MS = 15 * 60_000;
/** A node test skipped because nobody serves the GPU queue (see onAccelerator). */
export const UNSERVED = Symbol('unserved');
/** How long a node test waits for a slot on a busy GPU queue, at most, before it asks again. */
const BUSY_QUEUE_MAX_WAIT_SECONDS = 30 * 60;
/**
 * The wait for a GPU worker of runs started before the setting existed (their settings carry no
 * value). Not the config's default (30 s): recorded runs scheduled their node tests with this one.
 */
const GPU_QUEUE_WAIT_SECONDS_BEFORE_THE_SETTING = 60;

/** Extra options for one try of a node test: a longer wait for a worker while the queue is busy. */
type AcceleratorTry = { scheduleToStartTimeout?: string };

export class GpuWorkers {
  /** The GPU task queue of this cluster's accelerator type. */
  readonly queue: string;
  readonly gpu;
  /** While the GPU queue is unserved: the one probe every node test waits on (see onAccelerator). */
  acceleratorProbe: Promise<void> | undefined;
  /** ... and how many probes it has made in this run (bring-up continues as new after a number of them). */
  bringUpProbes = 0;
  private readonly queueWaitSeconds: number;

  constructor(
    private readonly run: ClusterRun,
    private readonly status: ClusterProjection,
  ) {
    this.queue = gpuTaskQueue(run.state.spec.gpu_type);
    this.queueWaitSeconds = run.settings.gpuQueueWaitSeconds ?? GPU_QUEUE_WAIT_SECONDS_BEFORE_THE_SETTING;
    this.gpu = proxyActivities<ClusterNodeTestActivities & AcceleratorActivities>({
      taskQueue: this.queue,
      // The bound on "is any accelerator host serving this queue?" (see onAccelerator).
      scheduleToStartTimeout: `${this.queueWaitSeconds} seconds`,
      startToCloseTimeout: '30 minutes',
      retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
    });
  }

  /**
   * Runs a node test on the accelerator queue. With no worker there, the
   * schedule-to-start timeout fires: the cluster says so once (a lifecycle
   * event and the current details) and waits for a worker, unless it is
   * deleted. The wait is one shared probe for the whole cluster that backs off
   * to a probe every 15 minutes, so an outage of days adds about a hundred
   * probes a day to the history, not a retry per node every 30 s. With
   * `skipWhenUnserved` (health checks of a running cluster) the test is
   * skipped instead (undefined), so the main loop goes on and can continue as
   * new however long the outage lasts.
   *
   * The same timeout fires when hosts poll the queue but every slot is taken
   * (many clusters testing at once). So before calling the queue unserved the
   * cluster asks Temporal whether a host polls it; if one does, the test waits
   * again for a slot, twice as long each time (up to 30 minutes), with no event.
   */
  async onAccelerator<T>(nodeId: string, what: string, run: (attempt: AcceleratorTry) => Promise<T>): Promise<T>;
  async onAccelerator<T>(
    nodeId: string,
    what: string,
    run: (attempt: AcceleratorTry) => Promise<T>,
    opts: { skipWhenUnserved: true },
  ): Promise<T | typeof UNSERVED>;
  async onAccelerator<T>(
    nodeId: string,
    what: string,
    run: (attempt: AcceleratorTry) => Promise<T>,
    opts: { skipWhenUnserved?: boolean } = {},
  ): Promise<T | typeof UNSERVED> {
    let attempt: AcceleratorTry = {};
    let busyWaitSeconds = this.queueWaitSeconds;
    for (let reported = false; ;) {
      try {
        if (this.acceleratorProbe) {
          if (opts.skipWhenUnserved) return UNSERVED;
          await this.acceleratorProbe;
        }
        return await run(attempt);
      } catch (err) {
        if (!isScheduleToStart(err)) throw err;
        this.run.abortIfDeleting();
        if (patched(PATCHES.busyAcceleratorQueue.id) && (await this.acceleratorQueuePolled())) {
          busyWaitSeconds = Math.min(busyWaitSeconds * 2, BUSY_QUEUE_MAX_WAIT_SECONDS);
          attempt = { scheduleToStartTimeout: `${busyWaitSeconds} seconds` };
          continue;
        }
        // (Before this patch each test retried on its own, at once.)
        const shared = patched(PATCHES.sharedAcceleratorProbe.id);
        if (!reported && !(shared && this.run.state.accelerator_queue_unserved_since)) {
          reported = true;
          if (shared) this.run.state.accelerator_queue_unserved_since = nowIso();
          lifecycleEvent(
            this.run.state,
            nodeId,
            'AcceleratorQueueUnserved',
            `No worker is serving ${this.queue}; the ${what} waits for one. Start a GPU worker with GANTRY_GPU_TYPES=${this.run.state.spec.gpu_type}.`,
          );
          await this.status.project(`Waiting for a worker on ${this.queue} (${what}).`);
        }
        if (!shared) continue;
        this.acceleratorProbe ??= this.probeAccelerator(nodeId);
        if (opts.skipWhenUnserved) return UNSERVED;
      }
    }
  }

  /** Whether a host polls the GPU queue now (Temporal's view of its pollers). */
  async acceleratorQueuePolled(): Promise<boolean> {
    return control.acceleratorQueuePolled({ gpuType: this.run.state.spec.gpu_type });
  }

  /** Probes the accelerator queue until a host serves it, backing off; then every waiting test goes on. */
  probeAccelerator(nodeId: string): Promise<void> {
    const probe = (async () => {
      for (let waitMs = PROBE_FIRST_WAIT_MS; ; waitMs = Math.min(waitMs * 2, PROBE_MAX_WAIT_MS)) {
        await condition(() => this.run.deleteRequested !== undefined, waitMs);
        this.run.abortIfDeleting();
        if (++this.bringUpProbes > (this.run.settings.bringUpProbesPerRun ?? 50)) await this.continueBringUpAsNew();
        // The probe asks Temporal whether a host polls the queue: a probe sent to the queue itself
        // waited for a free slot too, and took a busy queue for one still unserved.
        if (patched(PATCHES.busyAcceleratorQueue.id)) {
          if (await this.acceleratorQueuePolled()) break;
          continue;
        }
        try {
          await this.gpu.describeAcceleratorHost.executeWithOptions({ summary: `probe ${this.queue}` }, [
            { gpuType: this.run.state.spec.gpu_type },
          ]);
          break;
        } catch (err) {
          if (!isScheduleToStart(err)) break; // a worker took it: the queue is served again
        }
      }
      const since = this.run.state.accelerator_queue_unserved_since;
      this.run.state.accelerator_queue_unserved_since = undefined;
      lifecycleEvent(
        this.run.state,
        nodeId,
        'AcceleratorQueueServed',
        `A worker serves ${this.queue} again${since ? ` after ${Math.round((Date.now() - Date.parse(since)) / 60_000)} min` : ''}; node tests go on.`,
      );
    })().finally(() => {
      this.acceleratorProbe = undefined;
      this.run.wake = true;
    });
    // A delete ends the probe (DeletionRequested). The node tests waiting on it during bring-up see
    // that and abort; in a running cluster no test may be waiting (health rounds skip while it is
    // out), and the rejection, unhandled, failed every workflow task of the delete: the cluster was
    // never torn down. Marked handled here; whoever awaits the probe still gets the rejection.
    probe.catch(() => undefined);
    return probe;
  }

  /**
   * Bring-up never reaches the main loop's continue-as-new while its node tests wait for a GPU
   * worker: this hands the run over from inside that wait (the nodes, subnet and drivers are in the
   * state; the new run goes on with the tests), so an outage of any length keeps each run's history
   * to a few hundred events. Only in the first test phase, where every test waits on the probe;
   * the ContinueAsNew thrown here reaches the workflow function through the waiting tests.
   * (Before this patch bring-up probed in one run however long the outage lasted.)
   */
  async continueBringUpAsNew(): Promise<void> {
    // Remediations (repair rounds) run as children that a hand-over would cut off: not then.
    const repairing = this.run.state.remediations.some((r) => !FINAL_REMEDIATION_STATES.includes(r.state));
    if (
      this.run.state.provisioned ||
      this.run.state.phase !== 'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS' ||
      this.run.tasks.size ||
      repairing
    )
      return;
    if (!patched(PATCHES.bringUpContinuesAsNew.id)) return;
    // What is not in the state stays with this run: a delete or a preemption notice is acted on here.
    await continueAsNewWhenQuiet(
      () => this.run.deleteRequested === undefined && this.run.notices.length === 0 && allHandlersFinished(),
      () => this.status.project('Continuing as new while bring-up waits for a GPU worker.'),
      () => continueAsNew<ClusterWorkflow>({ ...this.run.input, carried: this.run.state, resumeBringUpTests: true }),
    );
  }
}
