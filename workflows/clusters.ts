/**
 * cluster (`cluster/<id>`): one entity workflow per GPU cluster, for its whole
 * life. It brings the cluster up phase by phase (control plane, subnet, data
 * plane, shared volume, drivers, acceptance and NCCL tests, with bounded
 * repair), then watches it: periodic health checks per node, remediations
 * (child workflows), preemption drains on durable timers, autoscaling and
 * resizes, the reservation's end. Every change is projected into PostgreSQL.
 * Changes arrive as Updates with validators; fleet notices as Signals.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  ContinueAsNew,
  isCancellation,
  ParentClosePolicy,
  condition,
  continueAsNew,
  patched,
  defineQuery,
  defineSignal,
  defineUpdate,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  startChild,
  upsertSearchAttributes,
  workflowInfo,
  allHandlersFinished,
} from '@temporalio/workflow';
import { failureMessage, isScheduleToStart } from './failures';
import { PATCHES } from './patches';
import type { AcceleratorActivities } from '../activities/accelerator';
import type { ClusterNodeTestActivities } from '../activities/clusters';
import { clusterControl, clusterWaits, NODE_POLL_MS } from './cluster-activities';
import {
  ClusterRuleError,
  clusterExpiry,
  resolveClusterUpdate,
  type ClusterUpdateRequest,
} from '../common/cluster-rules';
import {
  CLUSTER_MESSAGES,
  FINAL_REMEDIATION_STATES,
  GPUS_PER_NODE,
  STATUS_OF_PHASE,
  UPDATE_REJECTIONS,
  initialState,
  remediationWorkflowId,
  type ClusterNode,
  type ClusterState,
  type ClusterWorkflowInput,
  type CreateRemediationRequest,
  type NodeCapacity,
  type Remediation,
  type ReviewRemediationRequest,
} from '../common/clusters';
import {
  SA_PHASE,
  SA_PROJECT_ID,
  SA_RESOURCE_ID,
  SA_RESOURCE_TYPE,
  SA_STATUS,
  gantryPhaseOf,
  statusSearchAttributes,
} from '../common/search-attributes';
import { gpuTaskQueue } from '../workers/task-queues';
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
} from '../common/cluster-state';
import { nodeRemediation, type RemediationOutcome } from './node-remediation';

export const updateClusterUpdate = defineUpdate<void, [ClusterUpdateRequest]>(CLUSTER_MESSAGES.update);
export const deleteClusterUpdate = defineUpdate<void, [{ reason: string }]>(CLUSTER_MESSAGES.delete);
export const createRemediationUpdate = defineUpdate<Remediation, [CreateRemediationRequest]>(
  CLUSTER_MESSAGES.createRemediation,
);
export const reviewRemediationUpdate = defineUpdate<Remediation, [ReviewRemediationRequest]>(
  CLUSTER_MESSAGES.reviewRemediation,
);
export const preemptionNoticeSignal = defineSignal<[{ nodeId: string }]>(CLUSTER_MESSAGES.preemptionNotice);
export const remediationProgressSignal = defineSignal<
  [{ remediation: Remediation; nodeId: string; reason: string; message: string }]
>(CLUSTER_MESSAGES.remediationProgress);
export const clusterStateQuery = defineQuery<ClusterState>('clusterState');

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

const rejected = (type: string, message: string, param?: string) =>
  ApplicationFailure.create({ type, message, details: param ? [param] : [], nonRetryable: true });

export async function cluster(input: ClusterWorkflowInput): Promise<'deleted'> {
  const { clusterId, settings } = input;
  const state: ClusterState = input.carried ?? initialState(input);
  const queue = gpuTaskQueue(state.spec.gpu_type);
  const gpu = proxyActivities<ClusterNodeTestActivities & AcceleratorActivities>({
    taskQueue: queue,
    // The bound on "is any accelerator host serving this queue?" (see onAccelerator).
    // (runs started before the setting existed carry no value: a minute)
    scheduleToStartTimeout: `${settings.gpuQueueWaitSeconds ?? 60} seconds`,
    startToCloseTimeout: '30 minutes',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
  });
  const driver = { cuda: state.spec.cuda_version, driver: state.spec.nvidia_driver_version, os: state.spec.os_image };
  const createdAt = new Date(input.carried?.phase_transitions[0]?.transition_time ?? nowIso());

  let deleteRequested: string | undefined = input.deleteOnStart;
  let wake = false;
  let nextHealthCheck = 0;
  // A scale attempt that fell short is not retried before the next health round.
  let scaleDeferredUntil = 0;
  const notices: string[] = [];
  const tasks = new Set<Promise<void>>();
  const running = new Set<string>(); // remediation ids whose child is running
  // While the GPU queue is unserved: the one probe every node test waits on (see onAccelerator).
  let acceleratorProbe: Promise<void> | undefined;
  // ... and how many probes it has made in this run (bring-up continues as new after a number of them)
  let bringUpProbes = 0;
  // ... and the scopes that run them, with their ends
  const remediationScopes = new Map<string, { scope: CancellationScope; done: Promise<unknown> }>();

  // ---- projection ----
  let lastStatus = '';
  async function project(details?: string) {
    state.version++;
    const status = STATUS_OF_PHASE[state.phase];
    if (status !== lastStatus) {
      upsertSearchAttributes(statusSearchAttributes(status));
      lastStatus = status;
    }
    setCurrentDetails(
      `**${status}** (${state.phase})\n\n${details ?? ''}\n\nworkers: ${state.gpu_worker_nodes.length} live, ` +
        `${state.deleted_gpu_worker_nodes.length} deleted; open remediations: ${state.remediations.length}`,
    );
    await control.projectClusterState.executeWithOptions({ summary: `project ${state.phase}` }, [{ clusterId, state }]);
  }
  async function phase(p: ClusterState['phase'], details?: string) {
    setPhase(state, p);
    await project(details);
  }
  /** Bring-up moves on phase by phase; a delete that arrived meanwhile stops it at the next one. */
  async function bringUpPhase(p: ClusterState['phase'], details?: string) {
    abortIfDeleting();
    await phase(p, details);
  }
  /**
   * Runs background work (a drain, a remediation) beside the main loop. Its
   * failure becomes a lifecycle event: an unhandled rejection would fail every
   * later workflow task, and the cluster would stop answering.
   */
  function spawn(nodeId: string, what: string, work: () => Promise<void>) {
    const p: Promise<void> = work()
      .catch((err) => {
        if (isCancellation(err)) return;
        lifecycleEvent(
          state,
          nodeId,
          'BackgroundTaskFailed',
          `The ${what} of ${nodeId} failed: ${failureMessage(err)}`,
        );
      })
      .finally(() => {
        tasks.delete(p);
        wake = true;
      });
    tasks.add(p);
  }

  /** Thrown where bring-up or a wait can stop early because the cluster is being deleted. */
  class DeletionRequested extends Error {}
  const abortIfDeleting = () => {
    if (deleteRequested) throw new DeletionRequested();
  };

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
   */
  async function onAccelerator<T>(nodeId: string, what: string, run: () => Promise<T>): Promise<T>;
  async function onAccelerator<T>(
    nodeId: string,
    what: string,
    run: () => Promise<T>,
    opts: { skipWhenUnserved: true },
  ): Promise<T | typeof UNSERVED>;
  async function onAccelerator<T>(
    nodeId: string,
    what: string,
    run: () => Promise<T>,
    opts: { skipWhenUnserved?: boolean } = {},
  ): Promise<T | typeof UNSERVED> {
    for (let reported = false; ;) {
      try {
        if (acceleratorProbe) {
          if (opts.skipWhenUnserved) return UNSERVED;
          await acceleratorProbe;
        }
        return await run();
      } catch (err) {
        if (!isScheduleToStart(err)) throw err;
        abortIfDeleting();
        // (Before this patch each test retried on its own, at once.)
        const shared = patched(PATCHES.sharedAcceleratorProbe.id);
        if (!reported && !(shared && state.accelerator_queue_unserved_since)) {
          reported = true;
          if (shared) state.accelerator_queue_unserved_since = nowIso();
          lifecycleEvent(
            state,
            nodeId,
            'AcceleratorQueueUnserved',
            `No worker is serving ${queue}; the ${what} waits for one. Start a GPU worker with GANTRY_GPU_TYPES=${state.spec.gpu_type}.`,
          );
          await project(`Waiting for a worker on ${queue} (${what}).`);
        }
        if (!shared) continue;
        acceleratorProbe ??= probeAccelerator(nodeId);
        if (opts.skipWhenUnserved) return UNSERVED;
      }
    }
  }

  /** Probes the accelerator queue until a worker takes a probe, backing off; then every waiting test goes on. */
  function probeAccelerator(nodeId: string): Promise<void> {
    return (async () => {
      for (let waitMs = PROBE_FIRST_WAIT_MS; ; waitMs = Math.min(waitMs * 2, PROBE_MAX_WAIT_MS)) {
        await condition(() => deleteRequested !== undefined, waitMs);
        abortIfDeleting();
        if (++bringUpProbes > (settings.bringUpProbesPerRun ?? 50)) await continueBringUpAsNew();
        try {
          await gpu.describeAcceleratorHost.executeWithOptions({ summary: `probe ${queue}` }, [
            { gpuType: state.spec.gpu_type },
          ]);
          break;
        } catch (err) {
          if (!isScheduleToStart(err)) break; // a worker took it: the queue is served again
        }
      }
      const since = state.accelerator_queue_unserved_since;
      state.accelerator_queue_unserved_since = undefined;
      lifecycleEvent(
        state,
        nodeId,
        'AcceleratorQueueServed',
        `A worker serves ${queue} again${since ? ` after ${Math.round((Date.now() - Date.parse(since)) / 60_000)} min` : ''}; node tests go on.`,
      );
    })().finally(() => {
      acceleratorProbe = undefined;
      wake = true;
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
  async function continueBringUpAsNew(): Promise<void> {
    // Remediations (repair rounds) run as children that a hand-over would cut off: not then.
    const repairing = state.remediations.some((r) => !FINAL_REMEDIATION_STATES.includes(r.state));
    if (state.provisioned || state.phase !== 'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS' || tasks.size || repairing)
      return;
    if (!patched(PATCHES.bringUpContinuesAsNew.id)) return;
    // What is not in the state stays with this run: a delete or a preemption notice is acted on here.
    const quiet = () => deleteRequested === undefined && notices.length === 0 && allHandlersFinished();
    await condition(allHandlersFinished);
    if (!quiet()) return;
    await project('Continuing as new while bring-up waits for a GPU worker.');
    if (quiet()) await continueAsNew<typeof cluster>({ ...input, carried: state, resumeBringUpTests: true });
  }

  // ---- messages ----
  setHandler(clusterStateQuery, () => state);

  setHandler(
    updateClusterUpdate,
    async (req) => {
      state.counts = resolveClusterUpdate(state.spec, state.counts, req, new Date());
      if (req.reservation_end_time) state.spec.reservation_end_time = req.reservation_end_time;
      if (req.cluster_config) state.spec.cluster_config = { ...state.spec.cluster_config, ...req.cluster_config };
      for (const a of req.add_ons ?? []) {
        const addOn = state.spec.add_ons.find((x) => x.name === a.name)!;
        addOn.config = { ...addOn.config, ...a.config };
      }
      if (req.auto_remediation_enabled !== undefined) {
        state.spec.auto_remediation_enabled = req.auto_remediation_enabled;
        for (const n of state.gpu_worker_nodes) n.auto_remediation_enabled = req.auto_remediation_enabled;
      }
      if (state.spec.auto_scale) {
        state.autoscale_target_gpus = Math.max(state.autoscale_target_gpus, state.counts.num_gpus);
      }
      wake = true;
      await project('Update accepted.');
    },
    {
      validator: (req) => {
        if (deleteRequested) throw rejected(UPDATE_REJECTIONS.conflict, 'The cluster is being deleted.');
        try {
          resolveClusterUpdate(state.spec, state.counts, req, new Date());
        } catch (err) {
          if (err instanceof ClusterRuleError) throw rejected(UPDATE_REJECTIONS.invalid, err.message, err.param);
          throw err;
        }
      },
    },
  );

  setHandler(deleteClusterUpdate, ({ reason }) => {
    deleteRequested ??= reason;
    wake = true;
  });

  setHandler(
    createRemediationUpdate,
    async (req) => {
      const node = findWorker(state, req.instanceId)!;
      const now = nowIso();
      const r: Remediation = {
        id: req.remediationId,
        cluster_id: clusterId,
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
      state.remediations.push(r);
      await control.recordRemediation(r);
      wake = true;
      return r;
    },
    {
      validator: (req) => {
        if (deleteRequested) throw rejected(UPDATE_REJECTIONS.conflict, 'The cluster is being deleted.');
        const node = findWorker(state, req.instanceId);
        if (!node) throw rejected(UPDATE_REJECTIONS.notFound, `The cluster has no live node '${req.instanceId}'.`);
        if (state.draining[node.node_id]) {
          throw rejected(
            UPDATE_REJECTIONS.conflict,
            `Node '${node.node_id}' is being drained after a preemption notice.`,
          );
        }
        const open = state.remediations.find((r) => r.instance_id === node.instance_id);
        if (open) {
          throw rejected(
            UPDATE_REJECTIONS.conflict,
            `Node '${node.node_id}' already has remediation '${open.id}' in state ${open.state}.`,
          );
        }
      },
    },
  );

  setHandler(
    reviewRemediationUpdate,
    async (req) => {
      const r = state.remediations.find((x) => x.id === req.remediationId)!;
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
        const node = findWorker(state, r.instance_id);
        if (node) {
          state.remediation_declined.push(node.node_id);
          lifecycleEvent(state, node.node_id, 'RemediationRejected', `Remediation ${r.id} was rejected by ${req.by}.`);
        }
      }
      if (FINAL_REMEDIATION_STATES.includes(r.state)) state.remediations.splice(state.remediations.indexOf(r), 1);
      await control.recordRemediation(r);
      wake = true;
      await project();
      return { ...r };
    },
    {
      validator: (req) => {
        const r = state.remediations.find((x) => x.id === req.remediationId);
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
        if (req.action === 'cancel' && running.has(r.id)) {
          throw rejected(UPDATE_REJECTIONS.conflict, `Remediation '${r.id}' has already started.`);
        }
        if (req.mode === 'REMEDIATION_MODE_HOST_POWER_CYCLE') {
          throw rejected(
            UPDATE_REJECTIONS.invalid,
            'REMEDIATION_MODE_HOST_POWER_CYCLE cannot be set when approving; create a host power-cycle remediation instead.',
            'mode',
          );
        }
      },
    },
  );

  setHandler(preemptionNoticeSignal, ({ nodeId }) => {
    // A running cluster starts the drain from the handler: the 300 s grace cannot wait behind a
    // scale-up or a health round of the main loop. During bring-up the notice waits for the loop,
    // which owns the nodes until then. (Before this patch every notice waited for the loop.)
    if (state.provisioned && patched(PATCHES.drainOnNotice.id)) startDrain(nodeId);
    else notices.push(nodeId);
    wake = true;
  });

  setHandler(remediationProgressSignal, ({ remediation, nodeId, reason, message }) => {
    const r = state.remediations.find((x) => x.id === remediation.id);
    if (r) Object.assign(r, remediation);
    const node = findWorker(state, nodeId);
    if (node && (remediation.state === 'QUARANTINING' || remediation.state === 'QUARANTINED')) node.status = 'Cordoned';
    if (node && remediation.state === 'RUNNING') node.status = 'Remediating';
    lifecycleEvent(state, nodeId, reason, message);
    wake = true;
  });

  // ---- nodes ----

  /** Provisions worker nodes, waits for them to boot; failed boots are retired and reported. */
  async function launchWorkers(capacities: NodeCapacity[]): Promise<ClusterNode[]> {
    if (!capacities.length) return [];
    const preemptible = capacities[0] === 'preemptible';
    const seqs = capacities.map(() => ++state.node_seq);
    const created = await control.provisionNodes.executeWithOptions(
      { summary: `provision ${seqs.length} ${preemptible ? 'preemptible ' : ''}worker(s)` },
      [{ clusterId, region: state.spec.region, gpuType: state.spec.gpu_type, role: 'gpu-worker', preemptible, seqs }],
    );
    const nodes = created.map((f, i) => newNode(f, capacities[i], state.spec.auto_remediation_enabled));
    state.gpu_worker_nodes.push(...nodes);
    await project(`Booting ${nodes.map((n) => n.node_id).join(', ')}.`);
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
        lifecycleEvent(state, node.node_id, 'NodeBootFailed', `Node ${node.node_id} failed to boot; it is released.`);
        await control.releaseNodes({ nodeIds: [node.node_id] });
        retireWorker(state, node.node_id);
      }
    }
    await project();
    return booted;
  }

  /** Workers with drivers and a passing acceptance test; the others are retired. */
  async function qualifyWorkers(nodes: ClusterNode[]): Promise<ClusterNode[]> {
    if (!nodes.length) return [];
    await control.installDrivers.executeWithOptions({ summary: 'install drivers' }, [
      { nodeIds: nodes.map((n) => n.node_id), driver },
    ]);
    const reports = await Promise.all(nodes.map((n) => acceptance(n)));
    const passed: ClusterNode[] = [];
    for (const [i, node] of nodes.entries()) {
      if (reports[i]) {
        node.status = 'Ready';
        passed.push(node);
      } else {
        await control.releaseNodes({ nodeIds: [node.node_id] });
        retireWorker(state, node.node_id);
      }
    }
    return passed;
  }

  async function acceptance(node: ClusterNode): Promise<boolean> {
    const params = state.spec.acceptance_tests_params ?? {};
    if (params.enabled === false) return true;
    const report = await onAccelerator(node.node_id, 'acceptance test', () =>
      gpu.runAcceptanceTests.executeWithOptions({ summary: `acceptance ${node.node_id}` }, [
        { clusterId, nodeId: node.node_id, params },
      ]),
    ).catch((err) => nodeTestUnavailable(err));
    if (!report) {
      node.status = 'Failed';
      lifecycleEvent(
        state,
        node.node_id,
        'AcceptanceTestUnavailable',
        'The acceptance test could not run; the node is not accepted.',
      );
      return false;
    }
    if (!report.passed) {
      const failed = report.checks.filter((c) => !c.passed).map((c) => `${c.name}: ${c.detail}`);
      node.status = 'Failed';
      lifecycleEvent(state, node.node_id, 'AcceptanceTestFailed', failed.join('; '));
    }
    return report.passed;
  }

  /** Runs a remediation as a child workflow and applies its outcome to the nodes. */
  async function remediate(r: Remediation): Promise<RemediationOutcome> {
    const node = findWorker(state, r.instance_id);
    running.add(r.id);
    const replaces = r.mode === 'REMEDIATION_MODE_VM_ONLY' || r.mode === 'REMEDIATION_MODE_HOST_AWARE';
    // Its own scope, so that deleting the cluster can cancel it (the child then releases what it provisioned).
    const scope = new CancellationScope();
    let outcome: RemediationOutcome;
    try {
      const done = scope.run(async () => {
        const child = await startChild(nodeRemediation, {
          workflowId: remediationWorkflowId(clusterId, r.id),
          parentClosePolicy: ParentClosePolicy.TERMINATE,
          staticSummary: `${r.mode} of ${node?.node_id ?? r.instance_id} (${r.trigger})`,
          searchAttributes: remediationSearchAttributes(r, input.projectId),
          args: [
            {
              clusterId,
              parentWorkflowId: workflowInfo().workflowId,
              remediation: r,
              node: node!,
              region: state.spec.region,
              gpuType: state.spec.gpu_type,
              replacementSeq: replaces ? ++state.node_seq : undefined,
              driver,
              acceptance: state.spec.acceptance_tests_params ?? {},
            },
          ],
        });
        return child.result();
      });
      remediationScopes.set(r.id, { scope, done });
      outcome = await done;
    } catch (err) {
      // The child failed, was terminated or cancelled, or its id is taken: the remediation ends, the cluster goes on.
      // (Before this patch such a failure went unhandled.)
      if (!patched(PATCHES.remediationChildFailureIsState.id)) throw err;
      const now = nowIso();
      const cancelled = isCancellation(err) || scope.consideredCancelled;
      const message = cancelled
        ? `cancelled: ${deleteRequested ? `cluster deleted: ${deleteRequested}` : 'the cluster stopped it'}`
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
        state,
        node?.node_id ?? r.instance_id,
        cancelled ? 'RemediationCancelled' : 'RemediationFailed',
        `${r.mode} of ${node?.node_id ?? r.instance_id} ${cancelled ? 'was cancelled' : 'failed'}: ${message}`,
      );
    } finally {
      remediationScopes.delete(r.id);
    }
    running.delete(r.id);
    const i = state.remediations.findIndex((x) => x.id === r.id);
    if (i >= 0) state.remediations.splice(i, 1);
    const old = findWorker(state, r.instance_id);
    if (outcome.remediation.state === 'SUCCEEDED') {
      state.remediation_declined = state.remediation_declined.filter((id) => id !== old?.node_id);
      if (outcome.replacement && old) {
        const fresh = newNode(outcome.replacement, old.capacity, old.auto_remediation_enabled);
        fresh.status = 'Ready';
        retireWorker(state, old.node_id);
        state.gpu_worker_nodes.push(fresh);
      } else if (outcome.evicted && old) {
        retireWorker(state, old.node_id);
      } else if (old) {
        mergePhases(old, outcome.phases ?? []);
        old.status = 'Ready';
      }
    } else if (old) {
      old.status = 'Unhealthy';
    }
    refreshPreemptibleCount(state);
    return outcome;
  }

  /** Acceptance then NCCL tests of the bring-up, with a bounded number of repair rounds for failing nodes. */
  async function bringUpTests(): Promise<void> {
    const params = state.spec.acceptance_tests_params ?? {};
    const nodes = [...state.gpu_worker_nodes];
    await bringUpPhase('CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS', `Acceptance tests on ${nodes.length} node(s).`);
    const results = await Promise.all(nodes.map((n) => acceptance(n)));
    for (const [i, n] of nodes.entries()) if (results[i]) n.status = 'Ready';
    let failed = nodes.filter((_, i) => !results[i]);
    for (let round = 0; failed.length; round++) {
      await bringUpPhase(
        'CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED',
        `Failed: ${failed.map((n) => n.node_id).join(', ')}.`,
      );
      if (round >= settings.maxTestRepairRounds) break;
      // Replacements are acceptance-tested inside their remediation.
      await bringUpPhase(
        'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS',
        `Replacing ${failed.map((n) => n.node_id).join(', ')}.`,
      );
      failed = await repairAll(failed, 'acceptance tests failed');
    }
    if (params.nccl_multi_node_skipped || params.enabled === false) return;
    for (let round = 0; ; round++) {
      const ready = state.gpu_worker_nodes.filter((n) => n.status === 'Ready');
      if (!ready.length) return;
      await bringUpPhase('CLUSTER_PHASE_RUNNING_NCCL_TESTS', `NCCL all-reduce across ${ready.length} node(s).`);
      const report = await onAccelerator(ready[0].node_id, 'NCCL test', () =>
        gpu.runNcclTest.executeWithOptions({ summary: `nccl ${ready.length} node(s)` }, [
          { clusterId, nodeIds: ready.map((n) => n.node_id) },
        ]),
      ).catch((err) => nodeTestUnavailable(err));
      if (!report) {
        lifecycleEvent(
          state,
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
        lifecycleEvent(state, n.node_id, 'NcclTestFailed', report.detail);
      }
      await bringUpPhase('CLUSTER_PHASE_NCCL_TESTS_FAILED', report.detail);
      if (round >= settings.maxTestRepairRounds) return;
      await repairAll(failing, 'NCCL test failed');
    }
  }

  /**
   * Replaces failing nodes through remediations (automated; the bring-up
   * approves them itself). Returns the nodes whose repair failed.
   */
  async function repairAll(nodes: ClusterNode[], why: string): Promise<ClusterNode[]> {
    const outcomes = await Promise.all(
      nodes.map(async (node) => {
        const now = nowIso();
        const r: Remediation = {
          id: `rem-${node.node_id}-${state.version}`,
          cluster_id: clusterId,
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
        state.remediations.push(r);
        await control.recordRemediation(r);
        return remediate(r);
      }),
    );
    await project();
    return nodes.filter((_, i) => outcomes[i].remediation.state !== 'SUCCEEDED');
  }

  // ---- bring-up ----

  async function bringUp(): Promise<void> {
    await bringUpPhase('CLUSTER_PHASE_SCHEDULED');
    const start = state.spec.reservation_start_time ? Date.parse(state.spec.reservation_start_time) : 0;
    if (start > Date.now()) {
      setCurrentDetails(`Scheduled: provisioning starts at ${state.spec.reservation_start_time}.`);
      await condition(() => deleteRequested !== undefined, start - Date.now());
      if (deleteRequested) return;
    }

    await bringUpPhase('CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES');
    const [cpNode] = await control.provisionNodes.executeWithOptions({ summary: 'provision control plane' }, [
      {
        clusterId,
        region: state.spec.region,
        gpuType: state.spec.gpu_type,
        role: 'control-plane',
        preemptible: false,
        seqs: [0],
      },
    ]);
    const cp = newNode(cpNode, 'on_demand', false);
    state.control_plane_nodes = [cp];
    await project();
    const [cpSeen] = await waits.awaitNodes.executeWithOptions({ summary: 'await control plane' }, [
      { nodeIds: [cp.node_id], pollMs: NODE_POLL_MS },
    ]);
    mergePhases(cp, cpSeen.phase_transitions);
    cp.status = 'Ready';
    if (state.spec.cluster_type === 'KUBERNETES') {
      await control.issueKubeconfig({ clusterId, clusterName: state.spec.cluster_name });
    }
    state.control_plane_ready = true;

    await bringUpPhase('CLUSTER_PHASE_WAITING_FOR_SUBNET');
    state.subnet = await control.allocateSubnet({ clusterId });

    await bringUpPhase('CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES');
    for (let round = 0; round <= settings.maxTestRepairRounds; round++) {
      const missing = targetRegularNodes(state) - regularWorkers(state).length;
      if (missing <= 0) break;
      await launchWorkers(capacitiesForNewNodes(state, missing));
    }
    if (state.spec.cluster_type === 'SLURM') {
      for (const n of state.gpu_worker_nodes) n.slurm_worker_hostname = n.node_id.replace(/^sim-gpu-/, 'slurm-');
    }

    if (state.spec.volume_id) {
      await bringUpPhase('CLUSTER_PHASE_WAITING_FOR_SHARED_VOLUME');
      await waits.bindVolume.executeWithOptions({ summary: `bind ${state.spec.volume_id}` }, [
        { clusterId, volumeId: state.spec.volume_id },
      ]);
    }

    await bringUpPhase(
      'CLUSTER_PHASE_INSTALLING_DRIVERS',
      `CUDA ${driver.cuda}, driver ${driver.driver}, ${driver.os}.`,
    );
    await control.installDrivers.executeWithOptions({ summary: 'install drivers' }, [
      { nodeIds: state.gpu_worker_nodes.map((n) => n.node_id), driver },
    ]);

    await bringUpTests();
    await finishBringUp();
  }

  async function finishBringUp(): Promise<void> {
    state.provisioned = true;
    const settled = settledPhase(state);
    if (settled === 'CLUSTER_PHASE_READY') state.first_ready_at ??= nowIso();
    await phase(settled);
  }

  // ---- the running cluster ----

  /** Moves the regular workers toward their target; false when it fell short (nodes failed to join). */
  async function scaleRegularWorkers(): Promise<boolean> {
    const target = targetRegularNodes(state);
    const live = regularWorkers(state);
    if (live.length < target) {
      const autoscaling = live.length >= state.counts.num_gpus / GPUS_PER_NODE;
      await phase(autoscaling ? 'CLUSTER_PHASE_WAITING_FOR_AUTO_SCALER' : 'CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES');
      const joined = await qualifyWorkers(await launchWorkers(capacitiesForNewNodes(state, target - live.length)));
      for (const n of joined) {
        lifecycleEvent(
          state,
          n.node_id,
          'ServiceScaledUp',
          `Node ${n.node_id} joined (${n.capacity}): ${autoscaling ? 'autoscaler' : 'resize'} to ${target * GPUS_PER_NODE} GPUs.`,
        );
      }
    } else if (live.length > target) {
      for (const n of scaleDownVictims(state, target)) {
        await control.cordonNode({ nodeId: n.node_id });
        await control.releaseNodes({ nodeIds: [n.node_id] });
        retireWorker(state, n.node_id);
        lifecycleEvent(
          state,
          n.node_id,
          'ServiceScaledDown',
          `Node ${n.node_id} removed: scaled to ${target * GPUS_PER_NODE} GPUs.`,
        );
      }
    }
    state.last_scale_at = nowIso();
    await phase(settledPhase(state));
    return regularWorkers(state).length === target;
  }

  /** Moves preemptible workers toward what is desired, as capacity allows; false when nodes failed to join. */
  async function fulfilPreemptible(): Promise<boolean> {
    const want = state.counts.desired_preemptible_gpus / GPUS_PER_NODE;
    const have = preemptibleWorkers(state);
    if (have.length > want) {
      for (const n of have.slice(want)) {
        await control.releaseNodes({ nodeIds: [n.node_id] });
        retireWorker(state, n.node_id);
        lifecycleEvent(
          state,
          n.node_id,
          'ServiceScaledDown',
          `Preemptible node ${n.node_id} released: desired ${want * GPUS_PER_NODE} preemptible GPUs.`,
        );
      }
      await project();
      return true;
    }
    const missing = want - have.length - Object.keys(state.draining).length;
    if (missing <= 0) return true;
    const available = await control.preemptibleNodesAvailable({
      region: state.spec.region,
      gpuType: state.spec.gpu_type,
    });
    const n = available === null ? missing : Math.min(missing, available);
    if (n <= 0) return true; // capacity held back: the next round asks again
    const joined = await qualifyWorkers(await launchWorkers(Array(n).fill('preemptible')));
    for (const node of joined) {
      lifecycleEvent(state, node.node_id, 'ServiceScaledUp', `Preemptible node ${node.node_id} joined.`);
    }
    refreshPreemptibleCount(state);
    await project();
    return joined.length === n;
  }

  function startDrain(nodeId: string): void {
    const node = findWorker(state, nodeId);
    if (!node || state.draining[nodeId]) return;
    const grace = settings.preemptionGraceSeconds;
    state.draining[nodeId] = new Date(Date.now() + grace * 1000).toISOString();
    node.marked_for_deletion = true;
    node.status = 'Cordoned';
    lifecycleEvent(
      state,
      nodeId,
      'ServicePreemptionNotified',
      `Node ${nodeId} is being reclaimed: cordoned; pods receive SIGTERM and ${grace}s of grace.`,
    );
    refreshPreemptibleCount(state);
    spawn(nodeId, 'drain', async () => {
      await control.cordonNode({ nodeId });
      await project(`Draining ${nodeId} until ${state.draining[nodeId]}.`);
      await sleep(grace * 1000);
      await control.releaseNodes({ nodeIds: [nodeId] });
      retireWorker(state, nodeId);
      lifecycleEvent(
        state,
        nodeId,
        'ServicePreempted',
        `Node ${nodeId} was preempted and removed after its grace period.`,
      );
      await project();
    });
  }

  async function healthChecks(): Promise<void> {
    // While nobody serves the GPU queue the round is skipped: the shared probe says when a worker is back.
    if (acceleratorProbe) return;
    const busy = new Set(state.remediations.map((r) => r.instance_id));
    const nodes = state.gpu_worker_nodes.filter((n) => !state.draining[n.node_id] && !busy.has(n.instance_id));
    const reports = await Promise.all(
      nodes.map((n) =>
        onAccelerator(
          n.node_id,
          'health check',
          () =>
            gpu.runHealthCheck.executeWithOptions({ summary: `health ${n.node_id}` }, [
              { clusterId, nodeId: n.node_id },
            ]),
          { skipWhenUnserved: true },
        ).catch((err) => nodeTestUnavailable(err)),
      ),
    );
    let changed = false;
    for (const [i, node] of nodes.entries()) {
      const report = reports[i];
      if (report === UNSERVED) continue; // nobody serves the GPU queue: the node's health is not news
      const verdict = applyHealthReport(state, clusterId, node, report);
      if (verdict.remediation) await control.recordRemediation(verdict.remediation);
      changed ||= verdict.changed;
    }
    // While a resize is pending, the shortfall is the resize's business, not a degradation.
    // (added after the first recorded runs: those replay without it)
    const resizing =
      regularWorkers(state).length !== targetRegularNodes(state) && patched(PATCHES.resizeIsNotDegradation.id);
    if (changed || (!resizing && state.phase !== settledPhase(state))) await phase(settledPhase(state));
  }

  async function observeWorkload(): Promise<void> {
    if (!state.spec.auto_scale || !state.spec.auto_scale_max_gpus) return;
    if (!autoscaleCooledDown(state, Date.now(), settings.autoscaleCooldownSeconds)) return;
    state.autoscale_target_gpus = autoscaleTargetGpus(state, await control.observeWorkload({ clusterId }));
  }

  async function reconcile(): Promise<void> {
    while (notices.length) startDrain(notices.shift()!);
    for (const r of state.remediations) {
      if (r.state === 'PENDING' && !running.has(r.id)) {
        running.add(r.id);
        spawn(r.instance_name ?? r.instance_id, `remediation ${r.id}`, async () => {
          await remediate(r);
          await phase(settledPhase(state));
        });
      }
    }
    if (Date.now() < scaleDeferredUntil) return;
    let complete = true;
    if (regularWorkers(state).length !== targetRegularNodes(state)) complete = await scaleRegularWorkers();
    complete = (await fulfilPreemptible()) && complete;
    if (!complete) scaleDeferredUntil = nextHealthCheck;
  }

  async function tearDown(reason: string): Promise<void> {
    await phase('CLUSTER_PHASE_DELETING', reason);
    // Running remediations are cancelled and waited for: a replacement they provisioned is released by them.
    // (Before this patch they were terminated with the cluster, and a replacement node could stay behind.)
    if (remediationScopes.size > 0 && patched(PATCHES.cancelRemediationsOnDelete.id)) {
      const inFlight = [...remediationScopes.values()];
      for (const { scope } of inFlight) scope.cancel();
      await Promise.all(inFlight.map(({ done }) => done.catch(() => undefined)));
    }
    const now = nowIso();
    for (const r of state.remediations) {
      Object.assign(r, {
        state: 'CANCELLED',
        end_time: now,
        update_time: now,
        error_message: `cluster deleted: ${reason}`,
      });
      await control.recordRemediation(r);
    }
    state.remediations = [];
    const nodeIds = [...state.gpu_worker_nodes, ...state.control_plane_nodes].map((n) => n.node_id);
    // Workers are cordoned first so nothing new lands on them while they go (added after the first recorded runs).
    const drained = state.gpu_worker_nodes.length > 0 && patched(PATCHES.drainWorkersOnDelete.id);
    if (drained) {
      await Promise.all(
        state.gpu_worker_nodes.map((n) =>
          control.cordonNode.executeWithOptions({ summary: `cordon ${n.node_id}` }, [{ nodeId: n.node_id }]),
        ),
      );
    }
    if (nodeIds.length) await control.releaseNodes({ nodeIds });
    for (const n of [...state.gpu_worker_nodes]) {
      retireWorker(state, n.node_id);
      lifecycleEvent(
        state,
        n.node_id,
        'NodeReleased',
        `Node ${n.node_id} ${drained ? 'cordoned, drained and released' : 'released'}: ${reason}.`,
      );
    }
    for (const n of state.control_plane_nodes) n.status = 'Deleted';
    state.control_plane_ready = false;
    await control.releaseClusterResources({ clusterId });
    state.deleted_at = nowIso();
    state.deletion_reason = reason;
    await project(`Deleted: ${reason}.`);
  }

  // ---- life ----
  try {
    if (!input.carried) {
      await project('Queued.');
      await bringUp();
    } else if (input.resumeBringUpTests) {
      // The previous run handed over while bring-up's tests waited for a GPU worker.
      await bringUpTests();
      await finishBringUp();
    }
    let rounds = 0;
    nextHealthCheck = Date.now() + settings.healthCheckIntervalSeconds * 1000;
    while (!deleteRequested) {
      const expiry = clusterExpiry(state.spec, createdAt);
      if (expiry && Date.now() >= expiry.getTime()) {
        deleteRequested =
          state.spec.billing_type === 'RESERVED' ? 'the reservation ended' : 'the scheduled capacity window ended';
        break;
      }
      await reconcile();
      if (Date.now() >= nextHealthCheck) {
        await healthChecks();
        await observeWorkload();
        nextHealthCheck = Date.now() + settings.healthCheckIntervalSeconds * 1000;
        scaleDeferredUntil = 0;
        continue; // act on what the round found before sleeping
      }
      rounds++;
      if ((rounds >= settings.maxRoundsPerRun || workflowInfo().continueAsNewSuggested) && tasks.size === 0) {
        await condition(allHandlersFinished);
        const quiet = () => !wake && notices.length === 0 && deleteRequested === undefined && allHandlersFinished();
        if (quiet()) {
          await project('Continuing as new with the same state.');
          // A message that arrived while projecting stays with this run: it would be lost at the hand-over.
          if (quiet()) await continueAsNew<typeof cluster>({ ...input, carried: state });
        }
      }
      const until = Math.min(nextHealthCheck, expiry ? expiry.getTime() : Infinity) - Date.now();
      await condition(() => wake || deleteRequested !== undefined, Math.max(1, until));
      wake = false;
    }
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err; // the hand-over to the next run, not a failure
    if (!(err instanceof DeletionRequested)) {
      // Anything unexpected (a bug, a cancellation from the Temporal UI): nothing is left running unowned.
      // The nodes are released and the meters closed whatever happens to this run, then the run fails.
      // (Before this patch the run failed with its nodes still held.)
      if (!patched(PATCHES.compensateOnFailure.id)) throw err;
      deleteRequested ??= `the cluster workflow failed: ${failureMessage(err)}`;
      await CancellationScope.nonCancellable(() => tearDown(deleteRequested!));
      throw err;
    }
  }
  await tearDown(deleteRequested!);
  await condition(allHandlersFinished);
  return 'deleted';
}
