/**
 * Activities of the cluster workflows. Control-queue activities talk to the
 * compute provider (provision, wait, release) and project state into
 * PostgreSQL; node tests (acceptance, NCCL, health) run on gpu.<type> queues,
 * on the accelerator host's worker (createClusterNodeTestActivities).
 */
import { Context, heartbeat, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  STATUS_OF_PHASE,
  type AcceptanceTestsParams,
  type ClusterState,
  type FleetNode,
  type Remediation,
} from '../shared/clusters';
import type { GpuType } from '../shared/gpu-types';
import { gpuTaskQueue } from '../shared/task-queues';
import { describeTaskQueuePollers } from '../platform/temporal';
import {
  findVolume,
  projectCluster,
  setKubeconfig,
  setVolumeStatus,
  upsertRemediation,
  volumesOfCluster,
  deleteVolumeRow,
} from '../db/clusters';
import type { Db } from '../db/pool';
import { meterCluster } from './usage-meters';
import type { ComputeProvider, DescribedNode, NodeRequest } from '../providers/compute/compute';

export function createClusterActivities({ db, fleet }: { db: Db; fleet: ComputeProvider }) {
  return {
    async projectClusterState({ clusterId, state }: { clusterId: string; state: ClusterState }): Promise<void> {
      const projectId = await projectCluster(db, clusterId, state, STATUS_OF_PHASE[state.phase]);
      await meterCluster(db, clusterId, state, projectId); // GPU-hours follow the nodes the state holds
    },

    async recordRemediation(r: Remediation): Promise<void> {
      await upsertRemediation(db, r);
    },

    /**
     * Whether an accelerator host polls the GPU queue of `gpuType` (Temporal's poller list, recent
     * polls only): a node test that waited in vain for a worker met a busy queue if so, an unserved
     * one if not.
     */
    async acceleratorQueuePolled({ gpuType }: { gpuType: GpuType }): Promise<boolean> {
      const queue = await describeTaskQueuePollers(Context.current().client, gpuTaskQueue(gpuType));
      return queue.activity_pollers > 0;
    },

    async provisionNodes(req: NodeRequest): Promise<FleetNode[]> {
      return fleet.provisionNodes(req);
    },

    /**
     * Waits until every node has settled (running or failed), heartbeating the
     * phases seen so far; returns each node's phase history.
     */
    async awaitNodes({ nodeIds, pollMs }: { nodeIds: string[]; pollMs: number }): Promise<DescribedNode[]> {
      const signal = Context.current().cancellationSignal;
      for (;;) {
        const nodes = await fleet.describeNodes(nodeIds);
        heartbeat(nodes.map((n) => `${n.node_id}:${n.phase}`));
        if (nodes.every((n) => n.phase === 'NODE_PHASE_RUNNING' || n.phase === 'NODE_PHASE_FAILED')) return nodes;
        await sleep(pollMs, undefined, { signal });
      }
    },

    async allocateSubnet({ clusterId }: { clusterId: string }): Promise<string> {
      return fleet.allocateSubnet(clusterId);
    },

    /** Issues the cluster's kubeconfig and stores it with the cluster; the secret never enters workflow history. */
    async issueKubeconfig({ clusterId, clusterName }: { clusterId: string; clusterName: string }): Promise<void> {
      await setKubeconfig(db, clusterId, await fleet.kubeconfig(clusterId, clusterName));
    },

    /** Provisions (if needed) and binds the cluster's volume. */
    async bindVolume({ clusterId, volumeId }: { clusterId: string; volumeId: string }): Promise<void> {
      const volume = await findVolume(db, volumeId);
      if (!volume) throw ApplicationFailure.nonRetryable(`volume ${volumeId} no longer exists`, 'VolumeGone');
      if (volume.status === 'provisioning') {
        await fleet.provisionVolume(volumeId, volume.size_tib, () => heartbeat());
      }
      await setVolumeStatus(db, volumeId, 'bound', clusterId);
    },

    async installDrivers({
      nodeIds,
      driver,
    }: {
      nodeIds: string[];
      driver: { cuda: string; driver: string; os: string };
    }): Promise<void> {
      await fleet.installDrivers(nodeIds, driver);
    },

    async cordonNode({ nodeId }: { nodeId: string }): Promise<void> {
      await fleet.cordon(nodeId);
    },

    async restartNode({ nodeId }: { nodeId: string }): Promise<void> {
      await fleet.restart(nodeId);
    },

    async releaseNodes({ nodeIds }: { nodeIds: string[] }): Promise<void> {
      await fleet.release(nodeIds);
    },

    async preemptibleNodesAvailable({ region, gpuType }: { region: string; gpuType: GpuType }): Promise<number | null> {
      return fleet.preemptibleNodesAvailable(region, gpuType);
    },

    async observeWorkload({ clusterId }: { clusterId: string }) {
      return fleet.workload(clusterId);
    },

    /**
     * Deletion: every node still held for the cluster is released (also one a
     * remediation provisioned and never handed back), the subnet goes back,
     * inline volumes go with the cluster unless independent, others are unbound.
     */
    async releaseClusterResources({ clusterId }: { clusterId: string }): Promise<void> {
      const swept = await fleet.releaseAllOfCluster(clusterId);
      if (swept.length) log.warn('released nodes the cluster workflow no longer tracked', { clusterId, nodes: swept });
      await fleet.releaseSubnet(clusterId);
      for (const v of await volumesOfCluster(db, clusterId)) {
        if (v.created_with_cluster === clusterId && !v.is_lifecycle_independent) await deleteVolumeRow(db, v.id);
        else await setVolumeStatus(db, v.id, 'available', null);
      }
    },

    /** Storage volume workflow: carve out the volume, then mark it available (unless a cluster bound it meanwhile). */
    async provisionStandaloneVolume({ volumeId }: { volumeId: string }): Promise<'available' | 'gone'> {
      const volume = await findVolume(db, volumeId);
      if (!volume) return 'gone';
      await fleet.provisionVolume(volumeId, volume.size_tib, () => heartbeat());
      await db.query(
        `UPDATE cluster_volumes SET status = 'available', updated_at = now() WHERE id = $1 AND status = 'provisioning'`,
        [volumeId],
      );
      return 'available';
    },
  };
}

/** Node tests, on the gpu.<type> queue of the cluster's accelerator: run by the accelerator host's worker. */
export function createClusterNodeTestActivities({ fleet }: { fleet: ComputeProvider }) {
  return {
    async runAcceptanceTests(a: { clusterId: string; nodeId: string; params: AcceptanceTestsParams }) {
      return fleet.runAcceptanceTests(a.clusterId, a.nodeId, a.params);
    },
    async runNcclTest(a: { clusterId: string; nodeIds: string[] }) {
      return fleet.runNcclTest(a.clusterId, a.nodeIds);
    },
    async runHealthCheck(a: { clusterId: string; nodeId: string }) {
      return fleet.runHealthCheck(a.clusterId, a.nodeId);
    },
  };
}

export type ClusterActivities = ReturnType<typeof createClusterActivities>;
export type ClusterNodeTestActivities = ReturnType<typeof createClusterNodeTestActivities>;
