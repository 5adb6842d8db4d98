/**
 * The fleet SIMULATOR's operator controls that reach a cluster (api/routes/fleet.ts): finding a
 * cluster of any project, and delivering a preemption notice for one of its preemptible nodes to
 * its workflow, as a real fleet's reclaim would.
 */
import { findClusterOfAnyProject, type ClusterRow } from '../../db/clusters';
import type { Queryable } from '../../db/pool';
import { clusterWorkflowId } from '../../shared/clusters';
import { preemptionNoticeSignal } from '../../workflows/clusters';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import { signalWorkflow } from '../workflows';
import { clusterNotRunning } from './clusters';

export async function requireAnyCluster(db: Queryable, id: string): Promise<ClusterRow> {
  const row = await findClusterOfAnyProject(db, id);
  if (!row) throw notFound(`Cluster '${id}' not found.`);
  return row;
}

/** Signals the cluster's workflow that the fleet reclaims the node (id or instance id); answers its node id. */
export async function deliverPreemptionNotice(
  { db, temporal }: Pick<ApiDeps, 'db' | 'temporal'>,
  clusterId: string,
  nodeIdOrInstance: string,
): Promise<string> {
  const row = await requireAnyCluster(db, clusterId);
  if (row.deleted_at) throw conflict(`Cluster '${row.id}' was deleted.`);
  const node = row.state.gpu_worker_nodes.find(
    (n) => n.node_id === nodeIdOrInstance || n.instance_id === nodeIdOrInstance,
  );
  if (!node) throw notFound(`Cluster '${row.id}' has no live node '${nodeIdOrInstance}'.`);
  if (node.capacity !== 'preemptible') {
    throw badRequest(`Node '${node.node_id}' is not preemptible; only preemptible nodes are reclaimed.`, 'node_id');
  }
  await signalWorkflow(
    temporal,
    clusterWorkflowId(row.id),
    preemptionNoticeSignal,
    [{ nodeId: node.node_id }],
    undefined,
    clusterNotRunning(row.id),
  );
  return node.node_id;
}
