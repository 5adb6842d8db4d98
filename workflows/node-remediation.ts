/**
 * nodeRemediation (`cluster/<id>/remediation/<rid>`): the repair of one node,
 * a child of the cluster workflow. Cordon and drain (QUARANTINING ->
 * QUARANTINED), then by mode: reboot or power-cycle in place and check health
 * again; replace the VM (on another host for HOST_AWARE) and accept the new
 * node; or evict without replacement. Each step is recorded on the
 * remediation and reported to the parent, which shows it in the node's
 * lifecycle events and applies the outcome to its nodes.
 */
import {
  ActivityFailure,
  CancellationScope,
  getExternalWorkflowHandle,
  isCancellation,
  patched,
  proxyActivities,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { PATCHES } from './patches';
import type { ClusterNodeTestActivities } from '../activities/clusters';
import { clusterControl, clusterWaits, NODE_POLL_MS } from './cluster-activities';
import type {
  AcceptanceTestsParams,
  ClusterNode,
  FleetNode,
  NodePhase,
  PhaseTransition,
  Remediation,
  RemediationState,
} from '../shared/clusters';
import { CLUSTER_MESSAGES } from '../shared/clusters';
import type { GpuType } from '../shared/gpu-types';
import { gpuTaskQueue } from '../shared/task-queues';
import { statusSearchAttributes } from '../shared/search-attributes';

export interface RemediationInput {
  clusterId: string;
  parentWorkflowId: string;
  remediation: Remediation;
  node: ClusterNode;
  region: string;
  gpuType: GpuType;
  /** Sequence number for a replacement node (replacing modes only). */
  replacementSeq?: number;
  driver: { cuda: string; driver: string; os: string };
  acceptance: AcceptanceTestsParams;
}

export interface RemediationOutcome {
  remediation: Remediation;
  replacement?: FleetNode;
  evicted?: boolean;
  phases?: Array<PhaseTransition<NodePhase>>;
}

const control = clusterControl;
const waits = clusterWaits;

/**
 * GantryStatus/GantryPhase follow the remediation's state, so an ended one says it ended. (Before
 * this patch they kept the state it was started in: PENDING_APPROVAL's `waiting` after it succeeded.)
 */
const showState = (state: RemediationState) => {
  if (patched(PATCHES.remediationStatus.id)) upsertSearchAttributes(statusSearchAttributes(state));
};

export async function nodeRemediation(input: RemediationInput): Promise<RemediationOutcome> {
  const r: Remediation = { ...input.remediation };
  const node = input.node;
  const parent = getExternalWorkflowHandle(input.parentWorkflowId);
  const gpu = proxyActivities<ClusterNodeTestActivities>({
    taskQueue: gpuTaskQueue(input.gpuType),
    startToCloseTimeout: '30 minutes',
    retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 10 },
  });

  async function step(state: RemediationState, reason: string, message: string, extra: Partial<Remediation> = {}) {
    const now = new Date().toISOString();
    Object.assign(r, { state, update_time: now, ...extra });
    await control.recordRemediation({ ...r });
    showState(state);
    await parent.signal(CLUSTER_MESSAGES.remediationProgress, {
      remediation: { ...r },
      nodeId: node.node_id,
      reason,
      message,
    });
  }

  const outcome: RemediationOutcome = { remediation: r };
  // A replacement provisioned and not yet handed over: released if the remediation is cancelled.
  let pendingReplacement: string | undefined;
  try {
    await step('QUARANTINING', 'RemediationStarted', `${r.mode} of ${node.node_id} started (${r.trigger}).`, {
      start_time: new Date().toISOString(),
    });
    await control.cordonNode({ nodeId: node.node_id });
    await step('QUARANTINED', 'NodeCordoned', `Node ${node.node_id} cordoned and drained.`);
    await step('RUNNING', 'RemediationRunning', `Applying ${r.mode} to ${node.node_id}.`);

    switch (r.mode) {
      case 'REMEDIATION_MODE_REBOOT_VM':
      case 'REMEDIATION_MODE_HOST_POWER_CYCLE': {
        await control.restartNode({ nodeId: node.node_id });
        const [seen] = await waits.awaitNodes({ nodeIds: [node.node_id], pollMs: NODE_POLL_MS });
        outcome.phases = seen.phase_transitions;
        if (seen.phase !== 'NODE_PHASE_RUNNING')
          throw new Error(`node ${node.node_id} did not come back after restart`);
        const health = await gpu.runHealthCheck({ clusterId: input.clusterId, nodeId: node.node_id });
        if (!health.healthy) throw new Error(`node ${node.node_id} still unhealthy after restart: ${health.detail}`);
        break;
      }
      case 'REMEDIATION_MODE_VM_ONLY':
      case 'REMEDIATION_MODE_HOST_AWARE': {
        const [fresh] = await control.provisionNodes({
          clusterId: input.clusterId,
          region: input.region,
          gpuType: input.gpuType,
          role: 'gpu-worker',
          preemptible: node.capacity === 'preemptible',
          seqs: [input.replacementSeq!],
          avoidHosts: r.mode === 'REMEDIATION_MODE_HOST_AWARE' ? [node.host_name] : undefined,
        });
        pendingReplacement = fresh.node_id;
        const [seen] = await waits.awaitNodes({ nodeIds: [fresh.node_id], pollMs: NODE_POLL_MS });
        if (seen.phase !== 'NODE_PHASE_RUNNING') {
          await control.releaseNodes({ nodeIds: [fresh.node_id] });
          throw new Error(`replacement ${fresh.node_id} failed to boot`);
        }
        await control.installDrivers({ nodeIds: [fresh.node_id], driver: input.driver });
        if (input.acceptance.enabled !== false) {
          const report = await gpu.runAcceptanceTests({
            clusterId: input.clusterId,
            nodeId: fresh.node_id,
            params: input.acceptance,
          });
          if (!report.passed) {
            await control.releaseNodes({ nodeIds: [fresh.node_id] });
            const why = report.checks.filter((c) => !c.passed).map((c) => c.detail);
            throw new Error(`replacement ${fresh.node_id} failed acceptance: ${why.join('; ')}`);
          }
        }
        await control.releaseNodes({ nodeIds: [node.node_id] });
        pendingReplacement = undefined;
        outcome.replacement = { ...seen, phase_transitions: seen.phase_transitions };
        await step('RUNNING', 'RemediationReplaced', `Node ${node.node_id} replaced by ${fresh.node_id}.`);
        break;
      }
      case 'REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT':
        await control.releaseNodes({ nodeIds: [node.node_id] });
        outcome.evicted = true;
        break;
    }
    await step('SUCCEEDED', 'RemediationSucceeded', `${r.mode} of ${node.node_id} succeeded.`, {
      end_time: new Date().toISOString(),
    });
  } catch (err) {
    // Cancelled (its cluster is being deleted): give back the replacement it holds, say so, end as cancelled.
    // (Before this patch a cancellation was recorded as a failure and the replacement stayed provisioned.)
    if (isCancellation(err) && patched(PATCHES.remediationReleasesOnCancel.id)) {
      await CancellationScope.nonCancellable(async () => {
        if (pendingReplacement) await control.releaseNodes({ nodeIds: [pendingReplacement] });
        const now = new Date().toISOString();
        Object.assign(r, {
          state: 'CANCELLED',
          update_time: now,
          end_time: now,
          error_message: 'cancelled: the cluster is being deleted',
        });
        await control.recordRemediation({ ...r });
        showState('CANCELLED');
      });
      throw err;
    }
    const cause = err instanceof ActivityFailure ? (err.cause ?? err) : err;
    const message = (cause as Error).message ?? String(cause);
    await step('FAILED', 'RemediationFailed', `${r.mode} of ${node.node_id} failed: ${message}`, {
      end_time: new Date().toISOString(),
      error_message: message,
    });
  }
  outcome.remediation = { ...r };
  return outcome;
}
