/**
 * The behaviour of a GPU cluster's entity workflow (`cluster`, in clusters.ts):
 * its state and the transient bookkeeping of the current run, and what it
 * does with them: bring-up phase by phase, node tests on the accelerator
 * queue, remediations as child workflows, drains, scaling, health rounds and
 * teardown. The workflow function wires the messages and the main loop to
 * these methods; the decisions that need no Temporal API are pure functions in
 * shared/cluster-state.ts. Everything here is workflow code: deterministic, and
 * a change to the commands it issues goes behind a patch (patches.ts).
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  isCancellation,
  ParentClosePolicy,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  setCurrentDetails,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
  allHandlersFinished,
} from '@temporalio/workflow';
import { failureMessage, isScheduleToStart } from './failures';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import { PATCHES } from './patches';
import type { AcceleratorActivities } from '../activities/accelerator';
import type { ClusterNodeTestActivities } from '../activities/clusters';
import { clusterControl, clusterWaits, NODE_POLL_MS } from './cluster-activities';
import { ClusterRuleError, resolveClusterUpdate, type ClusterUpdateRequest } from '../shared/cluster-rules';
import {
  FINAL_REMEDIATION_STATES,
  GPUS_PER_NODE,
  STATUS_OF_PHASE,
  initialState,
  remediationWorkflowId,
  type ClusterNode,
  type ClusterState,
  type ClusterWorkflowInput,
  type CreateRemediationRequest,
  type NodeCapacity,
  type Remediation,
  type ReviewRemediationRequest,
} from '../shared/clusters';
import {
  SA_PHASE,
  SA_PROJECT_ID,
  SA_RESOURCE_ID,
  SA_RESOURCE_TYPE,
  SA_STATUS,
  gantryPhaseOf,
  statusSearchAttributes,
} from '../shared/search-attributes';
import { gpuTaskQueue } from '../shared/task-queues';
import {
  applyHealthReport,
  autoscaleCooledDown,
  autoscaleTargetGpus,
  capacitiesForNewNodes,
  findWorker,
  lifecycleEvent,
  mergePhases,
  newNode,
  nowIso,
  preemptibleWorkers,
  refreshPreemptibleCount,
  regularWorkers,
  retireWorker,
  scaleDownVictims,
  setPhase,
  settledPhase,
  targetRegularNodes,
} from '../shared/cluster-state';
import { nodeRemediation, type RemediationOutcome } from './node-remediation';

const control = clusterControl;
const waits = clusterWaits;

/**
 * A node test whose activity gave up (its retries spent, or refused) is
 * state, not the end of the cluster: undefined, for the caller to record.
 * Deletion and cancellation still stop the caller. (Before this patch the
 * failure failed the whole run.)
 */
function nodeTestUnavailable(err: unknown): undefined {
  if (!(err instanceof ActivityFailure) || !patched(PATCHES.nodeTestFailureIsState.id)) throw err;
  return undefined;
}

const remediationSearchAttributes = (r: Remediation, projectId: string) => ({
  [SA_PROJECT_ID.name]: [projectId],
  [SA_RESOURCE_TYPE.name]: ['remediation'],
  [SA_RESOURCE_ID.name]: [r.id],
  [SA_STATUS.name]: [r.state],
  [SA_PHASE.name]: [gantryPhaseOf(r.state)],
});

/** The shared probe of an unserved GPU queue waits this long first, then twice as long each time, up to the cap. */
const PROBE_FIRST_WAIT_MS = 30_000;
const PROBE_MAX_WAIT_MS = 15 * 60_000;
/** A node test skipped because nobody serves the GPU queue (see onAccelerator). */
const UNSERVED = Symbol('unserved');
/** How long a node test waits for a slot on a busy GPU queue, at most, before it asks again. */
const BUSY_QUEUE_MAX_WAIT_SECONDS = 30 * 60;

/** Extra options for one try of a node test: a longer wait for a worker while the queue is busy. */
type AcceleratorTry = { scheduleToStartTimeout?: string };

const rejected = (type: string, message: string, param?: string) =>
  ApplicationFailure.create({ type, message, details: param ? [param] : [], nonRetryable: true });

/** Thrown where bring-up or a wait can stop early because the cluster is being deleted. */
export class DeletionRequested extends Error {}

/** The input of the cluster workflow, as continueAsNew needs it (the workflow function lives in clusters.ts). */
type ClusterWorkflow = (input: ClusterWorkflowInput) => Promise<'deleted'>;

/** What a remediation child reports to its cluster (signal `remediationProgress`). */
export interface RemediationProgress {
  remediation: Remediation;
  nodeId: string;
  reason: string;
  message: string;
}

export class ClusterEntity {
  readonly state: ClusterState;
  readonly clusterId: string;
  readonly settings: ClusterWorkflowInput['settings'];
  /** The GPU task queue of this cluster's accelerator type. */
  readonly queue: string;
  readonly gpu;
  readonly driver: { cuda: string; driver: string; os: string };
  readonly createdAt: Date;

  /** Why the cluster is being deleted, once it is. */
  deleteRequested: string | undefined;
  /** Something changed that the main loop should act on before its next timer. */
  wake = false;
  nextHealthCheck = 0;
  /** A scale attempt that fell short is not retried before the next health round. */
  scaleDeferredUntil = 0;
  /** Preemption notices the main loop has yet to act on (during bring-up). */
  readonly notices: string[] = [];
  /** Background work beside the main loop (drains, remediations); see spawn. */
  readonly tasks = new Set<Promise<void>>();
  /** Remediation ids whose child is running. */
  readonly running = new Set<string>();
  /** While the GPU queue is unserved: the one probe every node test waits on (see onAccelerator). */
  acceleratorProbe: Promise<void> | undefined;
  /** ... and how many probes it has made in this run (bring-up continues as new after a number of them). */
  bringUpProbes = 0;
  /** The scopes that run remediation children, with their ends. */
  readonly remediationScopes = new Map<string, { scope: CancellationScope; done: Promise<unknown> }>();
  private lastStatus = '';

  constructor(readonly input: ClusterWorkflowInput) {
    this.clusterId = input.clusterId;
    this.settings = input.settings;
    this.state = input.carried ?? initialState(input);
    this.queue = gpuTaskQueue(this.state.spec.gpu_type);
    this.gpu = proxyActivities<ClusterNodeTestActivities & AcceleratorActivities>({
      taskQueue: this.queue,
      // The bound on "is any accelerator host serving this queue?" (see onAccelerator).
      // (runs started before the setting existed carry no value: a minute)
      scheduleToStartTimeout: `${this.settings.gpuQueueWaitSeconds ?? 60} seconds`,
      startToCloseTimeout: '30 minutes',
      retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
    });
    const spec = this.state.spec;
    this.driver = { cuda: spec.cuda_version, driver: spec.nvidia_driver_version, os: spec.os_image };
    this.createdAt = new Date(input.carried?.phase_transitions[0]?.transition_time ?? nowIso());
    this.deleteRequested = input.deleteOnStart;
  }

  // ---- projection ----
  async project(details?: string) {
    this.state.version++;
    const status = STATUS_OF_PHASE[this.state.phase];
    if (status !== this.lastStatus) {
      upsertSearchAttributes(statusSearchAttributes(status));
      this.lastStatus = status;
    }
    setCurrentDetails(
      `**${status}** (${this.state.phase})\n\n${details ?? ''}\n\nworkers: ${this.state.gpu_worker_nodes.length} live, ` +
        `${this.state.deleted_gpu_worker_nodes.length} deleted; open remediations: ${this.state.remediations.length}`,
    );
    await control.projectClusterState.executeWithOptions({ summary: `project ${this.state.phase}` }, [
      { clusterId: this.clusterId, state: this.state },
    ]);
  }
  async phase(p: ClusterState['phase'], details?: string) {
    setPhase(this.state, p);
    await this.project(details);
  }
  /** Bring-up moves on phase by phase; a delete that arrived meanwhile stops it at the next one. */
  async bringUpPhase(p: ClusterState['phase'], details?: string) {
    this.abortIfDeleting();
    await this.phase(p, details);
  }
  /**
   * Runs background work (a drain, a remediation) beside the main loop. Its
   * failure becomes a lifecycle event: an unhandled rejection would fail every
   * later workflow task, and the cluster would stop answering.
   */
  spawn(nodeId: string, what: string, work: () => Promise<void>) {
    const p: Promise<void> = work()
      .catch((err) => {
        if (isCancellation(err)) return;
        lifecycleEvent(
          this.state,
          nodeId,
          'BackgroundTaskFailed',
          `The ${what} of ${nodeId} failed: ${failureMessage(err)}`,
        );
      })
      .finally(() => {
        this.tasks.delete(p);
        this.wake = true;
      });
    this.tasks.add(p);
  }

  /** Thrown where bring-up or a wait can stop early because the cluster is being deleted. */
  abortIfDeleting(): void {
    if (this.deleteRequested) throw new DeletionRequested();
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
    let busyWaitSeconds = this.settings.gpuQueueWaitSeconds ?? 60;
    for (let reported = false; ;) {
      try {
        if (this.acceleratorProbe) {
          if (opts.skipWhenUnserved) return UNSERVED;
          await this.acceleratorProbe;
        }
        return await run(attempt);
      } catch (err) {
        if (!isScheduleToStart(err)) throw err;
        this.abortIfDeleting();
        if (patched(PATCHES.busyAcceleratorQueue.id) && (await this.acceleratorQueuePolled())) {
          busyWaitSeconds = Math.min(busyWaitSeconds * 2, BUSY_QUEUE_MAX_WAIT_SECONDS);
          attempt = { scheduleToStartTimeout: `${busyWaitSeconds} seconds` };
          continue;
        }
        // (Before this patch each test retried on its own, at once.)
        const shared = patched(PATCHES.sharedAcceleratorProbe.id);
        if (!reported && !(shared && this.state.accelerator_queue_unserved_since)) {
          reported = true;
          if (shared) this.state.accelerator_queue_unserved_since = nowIso();
          lifecycleEvent(
            this.state,
            nodeId,
            'AcceleratorQueueUnserved',
            `No worker is serving ${this.queue}; the ${what} waits for one. Start a GPU worker with GANTRY_GPU_TYPES=${this.state.spec.gpu_type}.`,
          );
          await this.project(`Waiting for a worker on ${this.queue} (${what}).`);
        }
        if (!shared) continue;
        this.acceleratorProbe ??= this.probeAccelerator(nodeId);
        if (opts.skipWhenUnserved) return UNSERVED;
      }
    }
  }

  /** Whether a host polls the GPU queue now (Temporal's view of its pollers). */
  async acceleratorQueuePolled(): Promise<boolean> {
    return control.acceleratorQueuePolled({ gpuType: this.state.spec.gpu_type });
  }

  /** Probes the accelerator queue until a host serves it, backing off; then every waiting test goes on. */
  probeAccelerator(nodeId: string): Promise<void> {
    return (async () => {
      for (let waitMs = PROBE_FIRST_WAIT_MS; ; waitMs = Math.min(waitMs * 2, PROBE_MAX_WAIT_MS)) {
        await condition(() => this.deleteRequested !== undefined, waitMs);
        this.abortIfDeleting();
        if (++this.bringUpProbes > (this.settings.bringUpProbesPerRun ?? 50)) await this.continueBringUpAsNew();
        // The probe asks Temporal whether a host polls the queue: a probe sent to the queue itself
        // waited for a free slot too, and took a busy queue for one still unserved.
        if (patched(PATCHES.busyAcceleratorQueue.id)) {
          if (await this.acceleratorQueuePolled()) break;
          continue;
        }
        try {
          await this.gpu.describeAcceleratorHost.executeWithOptions({ summary: `probe ${this.queue}` }, [
            { gpuType: this.state.spec.gpu_type },
          ]);
          break;
        } catch (err) {
          if (!isScheduleToStart(err)) break; // a worker took it: the queue is served again
        }
      }
      const since = this.state.accelerator_queue_unserved_since;
      this.state.accelerator_queue_unserved_since = undefined;
      lifecycleEvent(
        this.state,
        nodeId,
        'AcceleratorQueueServed',
        `A worker serves ${this.queue} again${since ? ` after ${Math.round((Date.now() - Date.parse(since)) / 60_000)} min` : ''}; node tests go on.`,
      );
    })().finally(() => {
      this.acceleratorProbe = undefined;
      this.wake = true;
    });
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
    const repairing = this.state.remediations.some((r) => !FINAL_REMEDIATION_STATES.includes(r.state));
    if (
      this.state.provisioned ||
      this.state.phase !== 'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS' ||
      this.tasks.size ||
      repairing
    )
      return;
    if (!patched(PATCHES.bringUpContinuesAsNew.id)) return;
    // What is not in the state stays with this run: a delete or a preemption notice is acted on here.
    const quiet = () => this.deleteRequested === undefined && this.notices.length === 0 && allHandlersFinished();
    await condition(allHandlersFinished);
    if (!quiet()) return;
    await this.project('Continuing as new while bring-up waits for a GPU worker.');
    if (quiet()) await continueAsNew<ClusterWorkflow>({ ...this.input, carried: this.state, resumeBringUpTests: true });
  }

  // ---- nodes ----

  /** Provisions worker nodes, waits for them to boot; failed boots are retired and reported. */
  async launchWorkers(capacities: NodeCapacity[]): Promise<ClusterNode[]> {
    if (!capacities.length) return [];
    const preemptible = capacities[0] === 'preemptible';
    const seqs = capacities.map(() => ++this.state.node_seq);
    const created = await control.provisionNodes.executeWithOptions(
      { summary: `provision ${seqs.length} ${preemptible ? 'preemptible ' : ''}worker(s)` },
      [
        {
          clusterId: this.clusterId,
          region: this.state.spec.region,
          gpuType: this.state.spec.gpu_type,
          role: 'gpu-worker',
          preemptible,
          seqs,
        },
      ],
    );
    const nodes = created.map((f, i) => newNode(f, capacities[i], this.state.spec.auto_remediation_enabled));
    this.state.gpu_worker_nodes.push(...nodes);
    await this.project(`Booting ${nodes.map((n) => n.node_id).join(', ')}.`);
    const seen = await waits.awaitNodes.executeWithOptions({ summary: `await ${nodes.length} worker(s)` }, [
      { nodeIds: nodes.map((n) => n.node_id), pollMs: NODE_POLL_MS },
    ]);
    const booted: ClusterNode[] = [];
    for (const node of nodes) {
      const d = seen.find((x) => x.node_id === node.node_id)!;
      mergePhases(node, d.phase_transitions);
      if (d.phase === 'NODE_PHASE_RUNNING') {
        node.status = 'Bootstrapped';
        booted.push(node);
      } else {
        lifecycleEvent(
          this.state,
          node.node_id,
          'NodeBootFailed',
          `Node ${node.node_id} failed to boot; it is released.`,
        );
        await control.releaseNodes({ nodeIds: [node.node_id] });
        retireWorker(this.state, node.node_id);
      }
    }
    await this.project();
    return booted;
  }

  /** Workers with drivers and a passing acceptance test; the others are retired. */
  async qualifyWorkers(nodes: ClusterNode[]): Promise<ClusterNode[]> {
    if (!nodes.length) return [];
    await control.installDrivers.executeWithOptions({ summary: 'install drivers' }, [
      { nodeIds: nodes.map((n) => n.node_id), driver: this.driver },
    ]);
    const reports = await Promise.all(nodes.map((n) => this.acceptance(n)));
    const passed: ClusterNode[] = [];
    for (const [i, node] of nodes.entries()) {
      if (reports[i]) {
        node.status = 'Ready';
        passed.push(node);
      } else {
        await control.releaseNodes({ nodeIds: [node.node_id] });
        retireWorker(this.state, node.node_id);
      }
    }
    return passed;
  }

  async acceptance(node: ClusterNode): Promise<boolean> {
    const params = this.state.spec.acceptance_tests_params ?? {};
    if (params.enabled === false) return true;
    const report = await this.onAccelerator(node.node_id, 'acceptance test', (attempt) =>
      this.gpu.runAcceptanceTests.executeWithOptions({ summary: `acceptance ${node.node_id}`, ...attempt }, [
        { clusterId: this.clusterId, nodeId: node.node_id, params },
      ]),
    ).catch((err) => nodeTestUnavailable(err));
    if (!report) {
      node.status = 'Failed';
      lifecycleEvent(
        this.state,
        node.node_id,
        'AcceptanceTestUnavailable',
        'The acceptance test could not run; the node is not accepted.',
      );
      return false;
    }
    if (!report.passed) {
      const failed = report.checks.filter((c) => !c.passed).map((c) => `${c.name}: ${c.detail}`);
      node.status = 'Failed';
      lifecycleEvent(this.state, node.node_id, 'AcceptanceTestFailed', failed.join('; '));
    }
    return report.passed;
  }

  /** Runs a remediation as a child workflow and applies its outcome to the nodes. */
  async remediate(r: Remediation): Promise<RemediationOutcome> {
    const node = findWorker(this.state, r.instance_id);
    this.running.add(r.id);
    const replaces = r.mode === 'REMEDIATION_MODE_VM_ONLY' || r.mode === 'REMEDIATION_MODE_HOST_AWARE';
    // Its own scope, so that deleting the cluster can cancel it (the child then releases what it provisioned).
    const scope = new CancellationScope();
    let outcome: RemediationOutcome;
    try {
      const done = scope.run(async () => {
        const child = await startChild(nodeRemediation, {
          workflowId: remediationWorkflowId(this.clusterId, r.id),
          parentClosePolicy: ParentClosePolicy.TERMINATE,
          staticSummary: `${r.mode} of ${node?.node_id ?? r.instance_id} (${r.trigger})`,
          searchAttributes: remediationSearchAttributes(r, this.input.projectId),
          args: [
            {
              clusterId: this.clusterId,
              parentWorkflowId: workflowInfo().workflowId,
              remediation: r,
              node: node!,
              region: this.state.spec.region,
              gpuType: this.state.spec.gpu_type,
              replacementSeq: replaces ? ++this.state.node_seq : undefined,
              driver: this.driver,
              acceptance: this.state.spec.acceptance_tests_params ?? {},
            },
          ],
        });
        return child.result();
      });
      this.remediationScopes.set(r.id, { scope, done });
      outcome = await done;
    } catch (err) {
      // The child failed, was terminated or cancelled, or its id is taken: the remediation ends, the cluster goes on.
      // (Before this patch such a failure went unhandled.)
      if (!patched(PATCHES.remediationChildFailureIsState.id)) throw err;
      const now = nowIso();
      const cancelled = isCancellation(err) || scope.consideredCancelled;
      const message = cancelled
        ? `cancelled: ${this.deleteRequested ? `cluster deleted: ${this.deleteRequested}` : 'the cluster stopped it'}`
        : failureMessage(err);
      outcome = {
        remediation: {
          ...r,
          state: cancelled ? 'CANCELLED' : 'FAILED',
          update_time: now,
          end_time: now,
          error_message: message,
        },
      };
      await CancellationScope.nonCancellable(() => control.recordRemediation(outcome.remediation));
      lifecycleEvent(
        this.state,
        node?.node_id ?? r.instance_id,
        cancelled ? 'RemediationCancelled' : 'RemediationFailed',
        `${r.mode} of ${node?.node_id ?? r.instance_id} ${cancelled ? 'was cancelled' : 'failed'}: ${message}`,
      );
    } finally {
      this.remediationScopes.delete(r.id);
    }
    this.running.delete(r.id);
    const i = this.state.remediations.findIndex((x) => x.id === r.id);
    if (i >= 0) this.state.remediations.splice(i, 1);
    const old = findWorker(this.state, r.instance_id);
    if (outcome.remediation.state === 'SUCCEEDED') {
      this.state.remediation_declined = this.state.remediation_declined.filter((id) => id !== old?.node_id);
      if (outcome.replacement && old) {
        const fresh = newNode(outcome.replacement, old.capacity, old.auto_remediation_enabled);
        fresh.status = 'Ready';
        retireWorker(this.state, old.node_id);
        this.state.gpu_worker_nodes.push(fresh);
      } else if (outcome.evicted && old) {
        retireWorker(this.state, old.node_id);
      } else if (old) {
        mergePhases(old, outcome.phases ?? []);
        old.status = 'Ready';
      }
    } else if (old) {
      old.status = 'Unhealthy';
    }
    refreshPreemptibleCount(this.state);
    return outcome;
  }

  /** Acceptance then NCCL tests of the bring-up, with a bounded number of repair rounds for failing nodes. */
  async bringUpTests(): Promise<void> {
    const params = this.state.spec.acceptance_tests_params ?? {};
    const nodes = [...this.state.gpu_worker_nodes];
    await this.bringUpPhase('CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS', `Acceptance tests on ${nodes.length} node(s).`);
    const results = await Promise.all(nodes.map((n) => this.acceptance(n)));
    for (const [i, n] of nodes.entries()) if (results[i]) n.status = 'Ready';
    let failed = nodes.filter((_, i) => !results[i]);
    for (let round = 0; failed.length; round++) {
      await this.bringUpPhase(
        'CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED',
        `Failed: ${failed.map((n) => n.node_id).join(', ')}.`,
      );
      if (round >= this.settings.maxTestRepairRounds) break;
      // Replacements are acceptance-tested inside their remediation.
      await this.bringUpPhase(
        'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS',
        `Replacing ${failed.map((n) => n.node_id).join(', ')}.`,
      );
      failed = await this.repairAll(failed, 'acceptance tests failed');
    }
    if (params.nccl_multi_node_skipped || params.enabled === false) return;
    for (let round = 0; ; round++) {
      const ready = this.state.gpu_worker_nodes.filter((n) => n.status === 'Ready');
      if (!ready.length) return;
      await this.bringUpPhase('CLUSTER_PHASE_RUNNING_NCCL_TESTS', `NCCL all-reduce across ${ready.length} node(s).`);
      const report = await this.onAccelerator(ready[0].node_id, 'NCCL test', (attempt) =>
        this.gpu.runNcclTest.executeWithOptions({ summary: `nccl ${ready.length} node(s)`, ...attempt }, [
          { clusterId: this.clusterId, nodeIds: ready.map((n) => n.node_id) },
        ]),
      ).catch((err) => nodeTestUnavailable(err));
      if (!report) {
        lifecycleEvent(
          this.state,
          ready[0].node_id,
          'NcclTestUnavailable',
          'The NCCL test could not run; the cluster comes up without it.',
        );
        return;
      }
      if (report.passed) return;
      const failing = ready.filter((n) => report.failing_node_ids.includes(n.node_id));
      for (const n of failing) {
        n.status = 'Failed';
        lifecycleEvent(this.state, n.node_id, 'NcclTestFailed', report.detail);
      }
      await this.bringUpPhase('CLUSTER_PHASE_NCCL_TESTS_FAILED', report.detail);
      if (round >= this.settings.maxTestRepairRounds) return;
      await this.repairAll(failing, 'NCCL test failed');
    }
  }

  /**
   * Replaces failing nodes through remediations (automated; the bring-up
   * approves them itself). Returns the nodes whose repair failed.
   */
  async repairAll(nodes: ClusterNode[], why: string): Promise<ClusterNode[]> {
    const outcomes = await Promise.all(
      nodes.map(async (node) => {
        const now = nowIso();
        const r: Remediation = {
          id: `rem-${node.node_id}-${this.state.version}`,
          cluster_id: this.clusterId,
          instance_id: node.instance_id,
          instance_name: node.node_id,
          mode: 'REMEDIATION_MODE_VM_ONLY',
          state: 'PENDING',
          trigger: 'REMEDIATION_TRIGGER_AUTOMATED',
          reason: `${why} during provisioning`,
          requested_by: 'gantry',
          create_time: now,
          update_time: now,
        };
        this.state.remediations.push(r);
        await control.recordRemediation(r);
        return this.remediate(r);
      }),
    );
    await this.project();
    return nodes.filter((_, i) => outcomes[i].remediation.state !== 'SUCCEEDED');
  }

  // ---- bring-up ----

  async bringUp(): Promise<void> {
    await this.bringUpPhase('CLUSTER_PHASE_SCHEDULED');
    const start = this.state.spec.reservation_start_time ? Date.parse(this.state.spec.reservation_start_time) : 0;
    if (start > Date.now()) {
      setCurrentDetails(`Scheduled: provisioning starts at ${this.state.spec.reservation_start_time}.`);
      await condition(() => this.deleteRequested !== undefined, start - Date.now());
      if (this.deleteRequested) return;
    }

    await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES');
    const [cpNode] = await control.provisionNodes.executeWithOptions({ summary: 'provision control plane' }, [
      {
        clusterId: this.clusterId,
        region: this.state.spec.region,
        gpuType: this.state.spec.gpu_type,
        role: 'control-plane',
        preemptible: false,
        seqs: [0],
      },
    ]);
    const cp = newNode(cpNode, 'on_demand', false);
    this.state.control_plane_nodes = [cp];
    await this.project();
    const [cpSeen] = await waits.awaitNodes.executeWithOptions({ summary: 'await control plane' }, [
      { nodeIds: [cp.node_id], pollMs: NODE_POLL_MS },
    ]);
    mergePhases(cp, cpSeen.phase_transitions);
    cp.status = 'Ready';
    if (this.state.spec.cluster_type === 'KUBERNETES') {
      await control.issueKubeconfig({ clusterId: this.clusterId, clusterName: this.state.spec.cluster_name });
    }
    this.state.control_plane_ready = true;

    await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_SUBNET');
    this.state.subnet = await control.allocateSubnet({ clusterId: this.clusterId });

    await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES');
    for (let round = 0; round <= this.settings.maxTestRepairRounds; round++) {
      const missing = targetRegularNodes(this.state) - regularWorkers(this.state).length;
      if (missing <= 0) break;
      await this.launchWorkers(capacitiesForNewNodes(this.state, missing));
    }
    if (this.state.spec.cluster_type === 'SLURM') {
      for (const n of this.state.gpu_worker_nodes) n.slurm_worker_hostname = n.node_id.replace(/^sim-gpu-/, 'slurm-');
    }

    if (this.state.spec.volume_id) {
      await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_SHARED_VOLUME');
      await waits.bindVolume.executeWithOptions({ summary: `bind ${this.state.spec.volume_id}` }, [
        { clusterId: this.clusterId, volumeId: this.state.spec.volume_id },
      ]);
    }

    await this.bringUpPhase(
      'CLUSTER_PHASE_INSTALLING_DRIVERS',
      `CUDA ${this.driver.cuda}, driver ${this.driver.driver}, ${this.driver.os}.`,
    );
    await control.installDrivers.executeWithOptions({ summary: 'install drivers' }, [
      { nodeIds: this.state.gpu_worker_nodes.map((n) => n.node_id), driver: this.driver },
    ]);

    await this.bringUpTests();
    await this.finishBringUp();
  }

  async finishBringUp(): Promise<void> {
    this.state.provisioned = true;
    const settled = settledPhase(this.state);
    if (settled === 'CLUSTER_PHASE_READY') this.state.first_ready_at ??= nowIso();
    await this.phase(settled);
  }

  // ---- the running cluster ----

  /** Moves the regular workers toward their target; false when it fell short (nodes failed to join). */
  async scaleRegularWorkers(): Promise<boolean> {
    const target = targetRegularNodes(this.state);
    const live = regularWorkers(this.state);
    if (live.length < target) {
      const autoscaling = live.length >= this.state.counts.num_gpus / GPUS_PER_NODE;
      await this.phase(
        autoscaling ? 'CLUSTER_PHASE_WAITING_FOR_AUTO_SCALER' : 'CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES',
      );
      const joined = await this.qualifyWorkers(
        await this.launchWorkers(capacitiesForNewNodes(this.state, target - live.length)),
      );
      for (const n of joined) {
        lifecycleEvent(
          this.state,
          n.node_id,
          'ServiceScaledUp',
          `Node ${n.node_id} joined (${n.capacity}): ${autoscaling ? 'autoscaler' : 'resize'} to ${target * GPUS_PER_NODE} GPUs.`,
        );
      }
    } else if (live.length > target) {
      for (const n of scaleDownVictims(this.state, target)) {
        await control.cordonNode({ nodeId: n.node_id });
        await control.releaseNodes({ nodeIds: [n.node_id] });
        retireWorker(this.state, n.node_id);
        lifecycleEvent(
          this.state,
          n.node_id,
          'ServiceScaledDown',
          `Node ${n.node_id} removed: scaled to ${target * GPUS_PER_NODE} GPUs.`,
        );
      }
    }
    this.state.last_scale_at = nowIso();
    await this.phase(settledPhase(this.state));
    return regularWorkers(this.state).length === target;
  }

  /** Moves preemptible workers toward what is desired, as capacity allows; false when nodes failed to join. */
  async fulfilPreemptible(): Promise<boolean> {
    const want = this.state.counts.desired_preemptible_gpus / GPUS_PER_NODE;
    const have = preemptibleWorkers(this.state);
    if (have.length > want) {
      for (const n of have.slice(want)) {
        await control.releaseNodes({ nodeIds: [n.node_id] });
        retireWorker(this.state, n.node_id);
        lifecycleEvent(
          this.state,
          n.node_id,
          'ServiceScaledDown',
          `Preemptible node ${n.node_id} released: desired ${want * GPUS_PER_NODE} preemptible GPUs.`,
        );
      }
      await this.project();
      return true;
    }
    const missing = want - have.length - Object.keys(this.state.draining).length;
    if (missing <= 0) return true;
    const available = await control.preemptibleNodesAvailable({
      region: this.state.spec.region,
      gpuType: this.state.spec.gpu_type,
    });
    const n = available === null ? missing : Math.min(missing, available);
    if (n <= 0) return true; // capacity held back: the next round asks again
    const joined = await this.qualifyWorkers(await this.launchWorkers(Array(n).fill('preemptible')));
    for (const node of joined) {
      lifecycleEvent(this.state, node.node_id, 'ServiceScaledUp', `Preemptible node ${node.node_id} joined.`);
    }
    refreshPreemptibleCount(this.state);
    await this.project();
    return joined.length === n;
  }

  startDrain(nodeId: string): void {
    const node = findWorker(this.state, nodeId);
    if (!node || this.state.draining[nodeId]) return;
    const grace = this.settings.preemptionGraceSeconds;
    this.state.draining[nodeId] = new Date(Date.now() + grace * 1000).toISOString();
    node.marked_for_deletion = true;
    node.status = 'Cordoned';
    lifecycleEvent(
      this.state,
      nodeId,
      'ServicePreemptionNotified',
      `Node ${nodeId} is being reclaimed: cordoned; pods receive SIGTERM and ${grace}s of grace.`,
    );
    refreshPreemptibleCount(this.state);
    this.spawn(nodeId, 'drain', async () => {
      await control.cordonNode({ nodeId });
      await this.project(`Draining ${nodeId} until ${this.state.draining[nodeId]}.`);
      await sleep(grace * 1000);
      await control.releaseNodes({ nodeIds: [nodeId] });
      retireWorker(this.state, nodeId);
      lifecycleEvent(
        this.state,
        nodeId,
        'ServicePreempted',
        `Node ${nodeId} was preempted and removed after its grace period.`,
      );
      await this.project();
    });
  }

  async healthChecks(): Promise<void> {
    // While nobody serves the GPU queue the round is skipped: the shared probe says when a worker is back.
    if (this.acceleratorProbe) return;
    const busy = new Set(this.state.remediations.map((r) => r.instance_id));
    const nodes = this.state.gpu_worker_nodes.filter(
      (n) => !this.state.draining[n.node_id] && !busy.has(n.instance_id),
    );
    const reports = await Promise.all(
      nodes.map((n) =>
        this.onAccelerator(
          n.node_id,
          'health check',
          (attempt) =>
            this.gpu.runHealthCheck.executeWithOptions({ summary: `health ${n.node_id}`, ...attempt }, [
              { clusterId: this.clusterId, nodeId: n.node_id },
            ]),
          { skipWhenUnserved: true },
        ).catch((err) => nodeTestUnavailable(err)),
      ),
    );
    let changed = false;
    for (const [i, node] of nodes.entries()) {
      const report = reports[i];
      if (report === UNSERVED) continue; // nobody serves the GPU queue: the node's health is not news
      const verdict = applyHealthReport(this.state, this.clusterId, node, report);
      if (verdict.remediation) await control.recordRemediation(verdict.remediation);
      changed ||= verdict.changed;
    }
    // While a resize is pending, the shortfall is the resize's business, not a degradation.
    // (added after the first recorded runs: those replay without it)
    const resizing =
      regularWorkers(this.state).length !== targetRegularNodes(this.state) &&
      patched(PATCHES.resizeIsNotDegradation.id);
    if (changed || (!resizing && this.state.phase !== settledPhase(this.state)))
      await this.phase(settledPhase(this.state));
  }

  async observeWorkload(): Promise<void> {
    if (!this.state.spec.auto_scale || !this.state.spec.auto_scale_max_gpus) return;
    if (!autoscaleCooledDown(this.state, Date.now(), this.settings.autoscaleCooldownSeconds)) return;
    this.state.autoscale_target_gpus = autoscaleTargetGpus(
      this.state,
      await control.observeWorkload({ clusterId: this.clusterId }),
    );
  }

  async reconcile(): Promise<void> {
    while (this.notices.length) this.startDrain(this.notices.shift()!);
    for (const r of this.state.remediations) {
      if (r.state === 'PENDING' && !this.running.has(r.id)) {
        this.running.add(r.id);
        this.spawn(r.instance_name ?? r.instance_id, `remediation ${r.id}`, async () => {
          await this.remediate(r);
          await this.phase(settledPhase(this.state));
        });
      }
    }
    if (Date.now() < this.scaleDeferredUntil) return;
    let complete = true;
    if (regularWorkers(this.state).length !== targetRegularNodes(this.state))
      complete = await this.scaleRegularWorkers();
    complete = (await this.fulfilPreemptible()) && complete;
    if (!complete) this.scaleDeferredUntil = this.nextHealthCheck;
  }

  async tearDown(reason: string): Promise<void> {
    await this.phase('CLUSTER_PHASE_DELETING', reason);
    // Running remediations are cancelled and waited for: a replacement they provisioned is released by them.
    // (Before this patch they were terminated with the cluster, and a replacement node could stay behind.)
    if (this.remediationScopes.size > 0 && patched(PATCHES.cancelRemediationsOnDelete.id)) {
      const inFlight = [...this.remediationScopes.values()];
      for (const { scope } of inFlight) scope.cancel();
      await Promise.all(inFlight.map(({ done }) => done.catch(() => undefined)));
    }
    const now = nowIso();
    for (const r of this.state.remediations) {
      Object.assign(r, {
        state: 'CANCELLED',
        end_time: now,
        update_time: now,
        error_message: `cluster deleted: ${reason}`,
      });
      await control.recordRemediation(r);
    }
    this.state.remediations = [];
    const nodeIds = [...this.state.gpu_worker_nodes, ...this.state.control_plane_nodes].map((n) => n.node_id);
    // Workers are cordoned first so nothing new lands on them while they go (added after the first recorded runs).
    const drained = this.state.gpu_worker_nodes.length > 0 && patched(PATCHES.drainWorkersOnDelete.id);
    if (drained) {
      await Promise.all(
        this.state.gpu_worker_nodes.map((n) =>
          control.cordonNode.executeWithOptions({ summary: `cordon ${n.node_id}` }, [{ nodeId: n.node_id }]),
        ),
      );
    }
    if (nodeIds.length) await control.releaseNodes({ nodeIds });
    for (const n of [...this.state.gpu_worker_nodes]) {
      retireWorker(this.state, n.node_id);
      lifecycleEvent(
        this.state,
        n.node_id,
        'NodeReleased',
        `Node ${n.node_id} ${drained ? 'cordoned, drained and released' : 'released'}: ${reason}.`,
      );
    }
    for (const n of this.state.control_plane_nodes) n.status = 'Deleted';
    this.state.control_plane_ready = false;
    await control.releaseClusterResources({ clusterId: this.clusterId });
    this.state.deleted_at = nowIso();
    this.state.deletion_reason = reason;
    await this.project(`Deleted: ${reason}.`);
  }

  // ---- messages (the workflow function routes each to one of these) ----

  /** Update `update`: a resize or a change of reservation end, config, add-ons or auto-remediation. */
  async update(req: ClusterUpdateRequest): Promise<void> {
    this.state.counts = resolveClusterUpdate(this.state.spec, this.state.counts, req, new Date());
    if (req.reservation_end_time) this.state.spec.reservation_end_time = req.reservation_end_time;
    if (req.cluster_config)
      this.state.spec.cluster_config = { ...this.state.spec.cluster_config, ...req.cluster_config };
    for (const a of req.add_ons ?? []) {
      const addOn = this.state.spec.add_ons.find((x) => x.name === a.name)!;
      addOn.config = { ...addOn.config, ...a.config };
    }
    if (req.auto_remediation_enabled !== undefined) {
      this.state.spec.auto_remediation_enabled = req.auto_remediation_enabled;
      for (const n of this.state.gpu_worker_nodes) n.auto_remediation_enabled = req.auto_remediation_enabled;
    }
    if (this.state.spec.auto_scale) {
      this.state.autoscale_target_gpus = Math.max(this.state.autoscale_target_gpus, this.state.counts.num_gpus);
    }
    this.wake = true;
    await this.project('Update accepted.');
  }

  validateUpdate(req: ClusterUpdateRequest): void {
    if (this.deleteRequested) throw rejected(UPDATE_REJECTIONS.conflict, 'The cluster is being deleted.');
    try {
      resolveClusterUpdate(this.state.spec, this.state.counts, req, new Date());
    } catch (err) {
      if (err instanceof ClusterRuleError) throw rejected(UPDATE_REJECTIONS.invalid, err.message, err.param);
      throw err;
    }
  }

  /** Update `delete`: the main loop stops and tears the cluster down. */
  requestDelete(reason: string): void {
    this.deleteRequested ??= reason;
    this.wake = true;
  }

  /** Update `createRemediation`: a manual remediation, straight to PENDING. */
  async createRemediation(req: CreateRemediationRequest): Promise<Remediation> {
    const node = findWorker(this.state, req.instanceId)!;
    const now = nowIso();
    const r: Remediation = {
      id: req.remediationId,
      cluster_id: this.clusterId,
      instance_id: node.instance_id,
      instance_name: node.node_id,
      mode: req.mode,
      state: 'PENDING', // created through the API: no approval step (SDK)
      trigger: 'REMEDIATION_TRIGGER_MANUAL',
      reason: req.reason,
      requested_by: req.requestedBy,
      create_time: now,
      update_time: now,
    };
    this.state.remediations.push(r);
    await control.recordRemediation(r);
    this.wake = true;
    return r;
  }

  validateCreateRemediation(req: CreateRemediationRequest): void {
    if (this.deleteRequested) throw rejected(UPDATE_REJECTIONS.conflict, 'The cluster is being deleted.');
    const node = findWorker(this.state, req.instanceId);
    if (!node) throw rejected(UPDATE_REJECTIONS.notFound, `The cluster has no live node '${req.instanceId}'.`);
    if (this.state.draining[node.node_id]) {
      throw rejected(UPDATE_REJECTIONS.conflict, `Node '${node.node_id}' is being drained after a preemption notice.`);
    }
    const open = this.state.remediations.find((r) => r.instance_id === node.instance_id);
    if (open) {
      throw rejected(
        UPDATE_REJECTIONS.conflict,
        `Node '${node.node_id}' already has remediation '${open.id}' in state ${open.state}.`,
      );
    }
  }

  /** Update `reviewRemediation`: approve, reject or cancel a remediation that has not started. */
  async reviewRemediation(req: ReviewRemediationRequest): Promise<Remediation> {
    const r = this.state.remediations.find((x) => x.id === req.remediationId)!;
    const now = nowIso();
    r.update_time = now;
    if (req.action === 'approve') {
      r.state = 'PENDING';
      if (req.mode) r.mode = req.mode;
    } else {
      r.state = 'CANCELLED';
      r.end_time = now;
    }
    if (req.action !== 'cancel') {
      r.reviewed_by = req.by;
      r.review_time = now;
      if (req.comment !== undefined) r.review_comment = req.comment;
    }
    if (req.action === 'reject') {
      const node = findWorker(this.state, r.instance_id);
      if (node) {
        this.state.remediation_declined.push(node.node_id);
        lifecycleEvent(
          this.state,
          node.node_id,
          'RemediationRejected',
          `Remediation ${r.id} was rejected by ${req.by}.`,
        );
      }
    }
    if (FINAL_REMEDIATION_STATES.includes(r.state))
      this.state.remediations.splice(this.state.remediations.indexOf(r), 1);
    await control.recordRemediation(r);
    this.wake = true;
    await this.project();
    return { ...r };
  }

  validateReviewRemediation(req: ReviewRemediationRequest): void {
    const r = this.state.remediations.find((x) => x.id === req.remediationId);
    if (!r) throw rejected(UPDATE_REJECTIONS.conflict, `Remediation '${req.remediationId}' is not open any more.`);
    if ((req.action === 'approve' || req.action === 'reject') && r.state !== 'PENDING_APPROVAL') {
      throw rejected(
        UPDATE_REJECTIONS.conflict,
        `Only a remediation in PENDING_APPROVAL can be ${req.action === 'approve' ? 'approved' : 'rejected'}; '${r.id}' is ${r.state}.`,
      );
    }
    if (req.action === 'cancel' && r.state !== 'PENDING_APPROVAL' && r.state !== 'PENDING') {
      throw rejected(
        UPDATE_REJECTIONS.conflict,
        `Only a remediation in PENDING_APPROVAL or PENDING can be cancelled; '${r.id}' is ${r.state}.`,
      );
    }
    if (req.action === 'cancel' && this.running.has(r.id)) {
      throw rejected(UPDATE_REJECTIONS.conflict, `Remediation '${r.id}' has already started.`);
    }
    if (req.mode === 'REMEDIATION_MODE_HOST_POWER_CYCLE') {
      throw rejected(
        UPDATE_REJECTIONS.invalid,
        'REMEDIATION_MODE_HOST_POWER_CYCLE cannot be set when approving; create a host power-cycle remediation instead.',
        'mode',
      );
    }
  }

  /** Signal `preemptionNotice`: the fleet reclaims a preemptible node. */
  onPreemptionNotice(nodeId: string): void {
    // A running cluster starts the drain from the handler: the 300 s grace cannot wait behind a
    // scale-up or a health round of the main loop. During bring-up the notice waits for the loop,
    // which owns the nodes until then. (Before this patch every notice waited for the loop.)
    if (this.state.provisioned && patched(PATCHES.drainOnNotice.id)) this.startDrain(nodeId);
    else this.notices.push(nodeId);
    this.wake = true;
  }

  /** Signal `remediationProgress`: a remediation child reports a step. */
  onRemediationProgress({ remediation, nodeId, reason, message }: RemediationProgress): void {
    const r = this.state.remediations.find((x) => x.id === remediation.id);
    if (r) Object.assign(r, remediation);
    const node = findWorker(this.state, nodeId);
    if (node && (remediation.state === 'QUARANTINING' || remediation.state === 'QUARANTINED')) node.status = 'Cordoned';
    if (node && remediation.state === 'RUNNING') node.status = 'Remediating';
    lifecycleEvent(this.state, nodeId, reason, message);
    this.wake = true;
  }
}
