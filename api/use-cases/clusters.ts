/** Lookups the cluster routes share (clusters, their storage and remediations). */
import { getCluster, type ClusterRow } from '../../db/clusters';
import type { Db } from '../../db/pool';
import { notFound } from '../errors';

/** The project's cluster, or a 404 naming it. */
export async function requireCluster(db: Db, projectId: string, clusterId: string): Promise<ClusterRow> {
  const row = await getCluster(db, projectId, clusterId);
  if (!row) throw notFound(`Cluster '${clusterId}' not found.`);
  return row;
}
