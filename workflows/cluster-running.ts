/**
 * The running cluster: scaling regular and preemptible workers toward their
 * targets, preemption drains on durable timers, health rounds, the
 * autoscaler's observation of the workload, and the teardown. The main loop
 * (clusters.ts, through ClusterEntity) calls these. Workflow code:
 * deterministic.
 */
import { patched, sleep } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { clusterControl as control } from './cluster-activities';
import { GPUS_PER_NODE } from '../shared/clusters';
import {
  applyHealthReport,
  autoscaleCooledDown,
  autoscaleTargetGpus,
  capacitiesForNewNodes,
  findWorker,
  lifecycleEvent,
  nowIso,
  preemptibleWorkers,
  refreshPreemptibleCount,
  regularWorkers,
  retireWorker,
  scaleDownVictims,
  settledPhase,
  targetRegularNodes,
} from '../shared/cluster-state';
import { UNSERVED, nodeTestUnavailable, type GpuWorkers } from './cluster-gpu-workers';
import type { ClusterNodes } from './cluster-nodes';
import type { ClusterProjection, ClusterRun } from './cluster-run';

export class RunningCluster {
  nextHealthCheck = 0;
  /** A scale attempt that fell short is not retried before the next health round. */
  scaleDeferredUntil = 0;

  constructor(
    private readonly run: ClusterRun,
    private readonly status: ClusterProjection,
    private readonly workers: GpuWorkers,
    private readonly nodes: ClusterNodes,
  ) {}

  /** The next health round is one interval from now. */
  scheduleHealthCheck(): void {
    this.nextHealthCheck = Date.now() + this.run.settings.healthCheckIntervalSeconds * 1000;
  }

  healthCheckDue(): boolean {
    return Date.now() >= this.nextHealthCheck;
  }

  /** A health round: every node's health, the autoscaler's observation, and the next round scheduled. */
  async healthRound(): Promise<void> {
    await this.healthChecks();
    await this.observeWorkload();
    this.scheduleHealthCheck();
    this.scaleDeferredUntil = 0;
  }

  /** Moves the regular workers toward their target; false when it fell short (nodes failed to join). */
  async scaleRegularWorkers(): Promise<boolean> {
    const target = targetRegularNodes(this.run.state);
    const live = regularWorkers(this.run.state);
    if (live.length < target) {
      const autoscaling = live.length >= this.run.state.counts.num_gpus / GPUS_PER_NODE;
      await this.status.phase(
        autoscaling ? 'CLUSTER_PHASE_WAITING_FOR_AUTO_SCALER' : 'CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES',
      );
      const joined = await this.nodes.qualifyWorkers(
        await this.nodes.launchWorkers(capacitiesForNewNodes(this.run.state, target - live.length)),
      );
      for (const n of joined) {
        lifecycleEvent(
          this.run.state,
          n.node_id,
          'ServiceScaledUp',
          `Node ${n.node_id} joined (${n.capacity}): ${autoscaling ? 'autoscaler' : 'resize'} to ${target * GPUS_PER_NODE} GPUs.`,
        );
      }
    } else if (live.length > target) {
      for (const n of scaleDownVictims(this.run.state, target)) {
        await control.cordonNode({ nodeId: n.node_id });
        await control.releaseNodes({ nodeIds: [n.node_id] });
        retireWorker(this.run.state, n.node_id);
        lifecycleEvent(
          this.run.state,
          n.node_id,
          'ServiceScaledDown',
          `Node ${n.node_id} removed: scaled to ${target * GPUS_PER_NODE} GPUs.`,
        );
      }
    }
    this.run.state.last_scale_at = nowIso();
    await this.status.phase(settledPhase(this.run.state));
    return regularWorkers(this.run.state).length === target;
  }

  /** Moves preemptible workers toward what is desired, as capacity allows; false when nodes failed to join. */
  async fulfilPreemptible(): Promise<boolean> {
    const want = this.run.state.counts.desired_preemptible_gpus / GPUS_PER_NODE;
    const have = preemptibleWorkers(this.run.state);
    if (have.length > want) {
      for (const n of have.slice(want)) {
        await control.releaseNodes({ nodeIds: [n.node_id] });
        retireWorker(this.run.state, n.node_id);
        lifecycleEvent(
          this.run.state,
          n.node_id,
          'ServiceScaledDown',
          `Preemptible node ${n.node_id} released: desired ${want * GPUS_PER_NODE} preemptible GPUs.`,
        );
      }
      await this.status.project();
      return true;
    }
    const missing = want - have.length - Object.keys(this.run.state.draining).length;
    if (missing <= 0) return true;
    const available = await control.preemptibleNodesAvailable({
      region: this.run.state.spec.region,
      gpuType: this.run.state.spec.gpu_type,
    });
    const n = available === null ? missing : Math.min(missing, available);
    if (n <= 0) return true; // capacity held back: the next round asks again
    const joined = await this.nodes.qualifyWorkers(await this.nodes.launchWorkers(Array(n).fill('preemptible')));
    for (const node of joined) {
      lifecycleEvent(this.run.state, node.node_id, 'ServiceScaledUp', `Preemptible node ${node.node_id} joined.`);
    }
    refreshPreemptibleCount(this.run.state);
    await this.status.project();
    return joined.length === n;
  }

  startDrain(nodeId: string): void {
    const node = findWorker(this.run.state, nodeId);
    if (!node || this.run.state.draining[nodeId]) return;
    const grace = this.run.settings.preemptionGraceSeconds;
    this.run.state.draining[nodeId] = new Date(Date.now() + grace * 1000).toISOString();
    node.marked_for_deletion = true;
    node.status = 'Cordoned';
    lifecycleEvent(
      this.run.state,
      nodeId,
      'ServicePreemptionNotified',
      `Node ${nodeId} is being reclaimed: cordoned; pods receive SIGTERM and ${grace}s of grace.`,
    );
    refreshPreemptibleCount(this.run.state);
    this.run.spawn(nodeId, 'drain', async () => {
      await control.cordonNode({ nodeId });
      await this.status.project(`Draining ${nodeId} until ${this.run.state.draining[nodeId]}.`);
      await sleep(grace * 1000);
      await control.releaseNodes({ nodeIds: [nodeId] });
      retireWorker(this.run.state, nodeId);
      lifecycleEvent(
        this.run.state,
        nodeId,
        'ServicePreempted',
        `Node ${nodeId} was preempted and removed after its grace period.`,
      );
      await this.status.project();
    });
  }

  async healthChecks(): Promise<void> {
    // While nobody serves the GPU queue the round is skipped: the shared probe says when a worker is back.
    if (this.workers.acceleratorProbe) return;
    const busy = new Set(this.run.state.remediations.map((r) => r.instance_id));
    const nodes = this.run.state.gpu_worker_nodes.filter(
      (n) => !this.run.state.draining[n.node_id] && !busy.has(n.instance_id),
    );
    const reports = await Promise.all(
      nodes.map((n) =>
        this.workers
          .onAccelerator(
            n.node_id,
            'health check',
            (attempt) =>
              this.workers.gpu.runHealthCheck.executeWithOptions({ summary: `health ${n.node_id}`, ...attempt }, [
                { clusterId: this.run.clusterId, nodeId: n.node_id },
              ]),
            { skipWhenUnserved: true },
          )
          .catch((err) => nodeTestUnavailable(err)),
      ),
    );
    let changed = false;
    for (const [i, node] of nodes.entries()) {
      const report = reports[i];
      if (report === UNSERVED) continue; // nobody serves the GPU queue: the node's health is not news
      const verdict = applyHealthReport(this.run.state, this.run.clusterId, node, report);
      if (verdict.remediation) await control.recordRemediation(verdict.remediation);
      changed ||= verdict.changed;
    }
    // While a resize is pending, the shortfall is the resize's business, not a degradation.
    // (added after the first recorded runs: those replay without it)
    const resizing =
      regularWorkers(this.run.state).length !== targetRegularNodes(this.run.state) &&
      patched(PATCHES.resizeIsNotDegradation.id);
    if (changed || (!resizing && this.run.state.phase !== settledPhase(this.run.state)))
      await this.status.phase(settledPhase(this.run.state));
  }

  async observeWorkload(): Promise<void> {
    if (!this.run.state.spec.auto_scale || !this.run.state.spec.auto_scale_max_gpus) return;
    if (!autoscaleCooledDown(this.run.state, Date.now(), this.run.settings.autoscaleCooldownSeconds)) return;
    this.run.state.autoscale_target_gpus = autoscaleTargetGpus(
      this.run.state,
      await control.observeWorkload({ clusterId: this.run.clusterId }),
    );
  }

  async reconcile(): Promise<void> {
    while (this.run.notices.length) this.startDrain(this.run.notices.shift()!);
    for (const r of this.run.state.remediations) {
      if (r.state === 'PENDING' && !this.nodes.running.has(r.id)) {
        this.nodes.running.add(r.id);
        this.run.spawn(r.instance_name ?? r.instance_id, `remediation ${r.id}`, async () => {
          await this.nodes.remediate(r);
          await this.status.phase(settledPhase(this.run.state));
        });
      }
    }
    if (Date.now() < this.scaleDeferredUntil) return;
    let complete = true;
    if (regularWorkers(this.run.state).length !== targetRegularNodes(this.run.state))
      complete = await this.scaleRegularWorkers();
    complete = (await this.fulfilPreemptible()) && complete;
    if (!complete) this.scaleDeferredUntil = this.nextHealthCheck;
  }

  async tearDown(reason: string): Promise<void> {
    await this.status.phase('CLUSTER_PHASE_DELETING', reason);
    // Running remediations are cancelled and waited for: a replacement they provisioned is released by them.
    // (Before this patch they were terminated with the cluster, and a replacement node could stay behind.)
    if (this.nodes.remediationScopes.size > 0 && patched(PATCHES.cancelRemediationsOnDelete.id)) {
      const inFlight = [...this.nodes.remediationScopes.values()];
      for (const { scope } of inFlight) scope.cancel();
      await Promise.all(inFlight.map(({ done }) => done.catch(() => undefined)));
    }
    const now = nowIso();
    for (const r of this.run.state.remediations) {
      Object.assign(r, {
        state: 'CANCELLED',
        end_time: now,
        update_time: now,
        error_message: `cluster deleted: ${reason}`,
      });
      await control.recordRemediation(r);
    }
    this.run.state.remediations = [];
    const nodeIds = [...this.run.state.gpu_worker_nodes, ...this.run.state.control_plane_nodes].map((n) => n.node_id);
    // Workers are cordoned first so nothing new lands on them while they go (added after the first recorded runs).
    const drained = this.run.state.gpu_worker_nodes.length > 0 && patched(PATCHES.drainWorkersOnDelete.id);
    if (drained) {
      await Promise.all(
        this.run.state.gpu_worker_nodes.map((n) =>
          control.cordonNode.executeWithOptions({ summary: `cordon ${n.node_id}` }, [{ nodeId: n.node_id }]),
        ),
      );
    }
    if (nodeIds.length) await control.releaseNodes({ nodeIds });
    for (const n of [...this.run.state.gpu_worker_nodes]) {
      retireWorker(this.run.state, n.node_id);
      lifecycleEvent(
        this.run.state,
        n.node_id,
        'NodeReleased',
        `Node ${n.node_id} ${drained ? 'cordoned, drained and released' : 'released'}: ${reason}.`,
      );
    }
    for (const n of this.run.state.control_plane_nodes) n.status = 'Deleted';
    this.run.state.control_plane_ready = false;
    await control.releaseClusterResources({ clusterId: this.run.clusterId });
    this.run.state.deleted_at = nowIso();
    this.run.state.deletion_reason = reason;
    await this.status.project(`Deleted: ${reason}.`);
  }
}
