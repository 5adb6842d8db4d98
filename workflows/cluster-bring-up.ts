/**
 * A cluster's bring-up, phase by phase: control plane, subnet, data plane,
 * shared volume, drivers, then acceptance and NCCL tests with a bounded number
 * of repair rounds. A delete that arrives meanwhile stops it at the next
 * phase. Workflow code: deterministic.
 */
import { condition, setCurrentDetails } from '@temporalio/workflow';
import { clusterControl as control, clusterWaits as waits, NODE_POLL_MS } from './cluster-activities';
import type { ClusterState } from '../shared/clusters';
import {
  capacitiesForNewNodes,
  lifecycleEvent,
  mergePhases,
  newNode,
  nowIso,
  regularWorkers,
  settledPhase,
  targetRegularNodes,
} from '../shared/cluster-state';
import { nodeTestUnavailable, type GpuWorkers } from './cluster-gpu-workers';
import type { ClusterNodes } from './cluster-nodes';
import type { ClusterProjection, ClusterRun } from './cluster-run';

export class ClusterBringUp {
  constructor(
    private readonly run: ClusterRun,
    private readonly status: ClusterProjection,
    private readonly workers: GpuWorkers,
    private readonly nodes: ClusterNodes,
  ) {}

  /** Bring-up moves on phase by phase; a delete that arrived meanwhile stops it at the next one. */
  async bringUpPhase(p: ClusterState['phase'], details?: string) {
    this.run.abortIfDeleting();
    await this.status.phase(p, details);
  }

  /** Acceptance then NCCL tests of the bring-up, with a bounded number of repair rounds for failing nodes. */
  async bringUpTests(): Promise<void> {
    const params = this.run.state.spec.acceptance_tests_params ?? {};
    const nodes = [...this.run.state.gpu_worker_nodes];
    await this.bringUpPhase('CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS', `Acceptance tests on ${nodes.length} node(s).`);
    const results = await Promise.all(nodes.map((n) => this.nodes.acceptance(n)));
    for (const [i, n] of nodes.entries()) if (results[i]) n.status = 'Ready';
    let failed = nodes.filter((_, i) => !results[i]);
    for (let round = 0; failed.length; round++) {
      await this.bringUpPhase(
        'CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED',
        `Failed: ${failed.map((n) => n.node_id).join(', ')}.`,
      );
      if (round >= this.run.settings.maxTestRepairRounds) break;
      // Replacements are acceptance-tested inside their remediation.
      await this.bringUpPhase(
        'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS',
        `Replacing ${failed.map((n) => n.node_id).join(', ')}.`,
      );
      failed = await this.nodes.repairAll(failed, 'acceptance tests failed');
    }
    if (params.nccl_multi_node_skipped || params.enabled === false) return;
    for (let round = 0; ; round++) {
      const ready = this.run.state.gpu_worker_nodes.filter((n) => n.status === 'Ready');
      if (!ready.length) return;
      await this.bringUpPhase('CLUSTER_PHASE_RUNNING_NCCL_TESTS', `NCCL all-reduce across ${ready.length} node(s).`);
      const report = await this.workers
        .onAccelerator(ready[0].node_id, 'NCCL test', (attempt) =>
          this.workers.gpu.runNcclTest.executeWithOptions({ summary: `nccl ${ready.length} node(s)`, ...attempt }, [
            { clusterId: this.run.clusterId, nodeIds: ready.map((n) => n.node_id) },
          ]),
        )
        .catch((err) => nodeTestUnavailable(err));
      if (!report) {
        lifecycleEvent(
          this.run.state,
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
        lifecycleEvent(this.run.state, n.node_id, 'NcclTestFailed', report.detail);
      }
      await this.bringUpPhase('CLUSTER_PHASE_NCCL_TESTS_FAILED', report.detail);
      if (round >= this.run.settings.maxTestRepairRounds) return;
      await this.nodes.repairAll(failing, 'NCCL test failed');
    }
  }

  async bringUp(): Promise<void> {
    await this.bringUpPhase('CLUSTER_PHASE_SCHEDULED');
    const start = this.run.state.spec.reservation_start_time
      ? Date.parse(this.run.state.spec.reservation_start_time)
      : 0;
    if (start > Date.now()) {
      setCurrentDetails(`Scheduled: provisioning starts at ${this.run.state.spec.reservation_start_time}.`);
      await condition(() => this.run.deleteRequested !== undefined, start - Date.now());
      if (this.run.deleteRequested) return;
    }

    await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES');
    const [cpNode] = await control.provisionNodes.executeWithOptions({ summary: 'provision control plane' }, [
      {
        clusterId: this.run.clusterId,
        region: this.run.state.spec.region,
        gpuType: this.run.state.spec.gpu_type,
        role: 'control-plane',
        preemptible: false,
        seqs: [0],
      },
    ]);
    const cp = newNode(cpNode, 'on_demand', false);
    this.run.state.control_plane_nodes = [cp];
    await this.status.project();
    const [cpSeen] = await waits.awaitNodes.executeWithOptions({ summary: 'await control plane' }, [
      { nodeIds: [cp.node_id], pollMs: NODE_POLL_MS },
    ]);
    mergePhases(cp, cpSeen.phase_transitions);
    cp.status = 'Ready';
    if (this.run.state.spec.cluster_type === 'KUBERNETES') {
      await control.issueKubeconfig({ clusterId: this.run.clusterId, clusterName: this.run.state.spec.cluster_name });
    }
    this.run.state.control_plane_ready = true;

    await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_SUBNET');
    this.run.state.subnet = await control.allocateSubnet({ clusterId: this.run.clusterId });

    await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES');
    for (let round = 0; round <= this.run.settings.maxTestRepairRounds; round++) {
      const missing = targetRegularNodes(this.run.state) - regularWorkers(this.run.state).length;
      if (missing <= 0) break;
      await this.nodes.launchWorkers(capacitiesForNewNodes(this.run.state, missing));
    }
    if (this.run.state.spec.cluster_type === 'SLURM') {
      for (const n of this.run.state.gpu_worker_nodes)
        n.slurm_worker_hostname = n.node_id.replace(/^sim-gpu-/, 'slurm-');
    }

    if (this.run.state.spec.volume_id) {
      await this.bringUpPhase('CLUSTER_PHASE_WAITING_FOR_SHARED_VOLUME');
      await waits.bindVolume.executeWithOptions({ summary: `bind ${this.run.state.spec.volume_id}` }, [
        { clusterId: this.run.clusterId, volumeId: this.run.state.spec.volume_id },
      ]);
    }

    await this.bringUpPhase(
      'CLUSTER_PHASE_INSTALLING_DRIVERS',
      `CUDA ${this.run.driver.cuda}, driver ${this.run.driver.driver}, ${this.run.driver.os}.`,
    );
    await control.installDrivers.executeWithOptions({ summary: 'install drivers' }, [
      { nodeIds: this.run.state.gpu_worker_nodes.map((n) => n.node_id), driver: this.run.driver },
    ]);

    await this.bringUpTests();
    await this.finishBringUp();
  }

  async finishBringUp(): Promise<void> {
    this.run.state.provisioned = true;
    const settled = settledPhase(this.run.state);
    if (settled === 'CLUSTER_PHASE_READY') this.run.state.first_ready_at ??= nowIso();
    await this.status.phase(settled);
  }
}
