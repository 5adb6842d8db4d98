/** Read model of GPU clusters, their storage volumes and node remediations. */
import type {
  ClusterState,
  Remediation,
  RemediationMode,
  RemediationState,
  RemediationTrigger,
} from '../shared/clusters';
import type { Queryable } from './pool';

export interface ClusterRow {
  id: string;
  project_id: string;
  name: string;
  workflow_id: string;
  status: string;
  phase: string;
  state: ClusterState;
  kube_config: string | null;
  created_at: Date;
  deleted_at: Date | null;
}

export interface VolumeRow {
  id: string;
  project_id: string;
  name: string;
  region: string;
  size_tib: number;
  status: 'provisioning' | 'available' | 'bound' | 'deleting' | 'failed';
  is_lifecycle_independent: boolean;
  cluster_id: string | null;
  created_with_cluster: string | null;
}

const CLUSTER_COLUMNS = 'id, project_id, name, workflow_id, status, phase, state, kube_config, created_at, deleted_at';

export async function insertCluster(
  db: Queryable,
  c: { id: string; projectId: string; workflowId: string; state: ClusterState },
): Promise<void> {
  await db.query(
    `INSERT INTO clusters (id, project_id, name, workflow_id, status, phase, state, version)
     VALUES ($1, $2, $3, $4, 'WaitingForControlPlaneNodes', $5, $6, $7)`,
    [c.id, c.projectId, c.state.spec.cluster_name, c.workflowId, c.state.phase, c.state, c.state.version],
  );
}

export async function deleteClusterRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM clusters WHERE id = $1', [id]);
}

/**
 * Writes the workflow's state. Projections may finish out of order (they are
 * separate activities); the version keeps an older one from overwriting a newer.
 * Returns the cluster's project when it wrote the state, null when it did not
 * (a newer state is there, or no such cluster).
 */
export async function projectCluster(
  db: Queryable,
  clusterId: string,
  state: ClusterState,
  status: string,
): Promise<string | null> {
  const { rows } = await db.query<{ project_id: string }>(
    `UPDATE clusters
        SET state = $2, version = $3, status = $4, phase = $5, updated_at = now(),
            deleted_at = $6
      WHERE id = $1 AND version <= $3
      RETURNING project_id`,
    [clusterId, state, state.version, status, state.phase, state.deleted_at ?? null],
  );
  return rows[0]?.project_id ?? null;
}

export async function setKubeconfig(db: Queryable, clusterId: string, kubeconfig: string): Promise<void> {
  await db.query('UPDATE clusters SET kube_config = $2 WHERE id = $1 AND kube_config IS NULL', [clusterId, kubeconfig]);
}

/** A cluster of any project, deleted or not: for the fleet simulator's operator controls. */
export async function findClusterOfAnyProject(db: Queryable, id: string): Promise<ClusterRow | null> {
  const { rows } = await db.query<ClusterRow>('SELECT id, state, deleted_at FROM clusters WHERE id = $1', [id]);
  return rows[0] ?? null;
}

export async function getCluster(db: Queryable, projectId: string, id: string): Promise<ClusterRow | null> {
  const { rows } = await db.query<ClusterRow>(
    `SELECT ${CLUSTER_COLUMNS} FROM clusters WHERE id = $1 AND project_id = $2`,
    [id, projectId],
  );
  return rows[0] ?? null;
}

export async function listClusters(db: Queryable, projectId: string): Promise<ClusterRow[]> {
  const { rows } = await db.query<ClusterRow>(
    `SELECT ${CLUSTER_COLUMNS} FROM clusters WHERE project_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC`,
    [projectId],
  );
  return rows;
}

/**
 * Remediations of each cluster keyed by instance: the newest of each, for `latest_remediation` on
 * nodes. One query for a whole list (a query per cluster made a list of 50 cost 100 queries).
 */
export async function latestRemediationsOfClusters(
  db: Queryable,
  clusterIds: string[],
): Promise<Map<string, Map<string, Remediation>>> {
  const { rows } = await db.query<{ cluster_id: string; instance_id: string; doc: Remediation }>(
    `SELECT DISTINCT ON (cluster_id, instance_id) cluster_id, instance_id, doc FROM cluster_remediations
      WHERE cluster_id = ANY($1) ORDER BY cluster_id, instance_id, create_time DESC, id DESC`,
    [clusterIds],
  );
  const byCluster = new Map<string, Map<string, Remediation>>();
  for (const r of rows) {
    let latest = byCluster.get(r.cluster_id);
    if (!latest) byCluster.set(r.cluster_id, (latest = new Map()));
    latest.set(r.instance_id, r.doc);
  }
  return byCluster;
}

// ---- volumes ----

const VOLUME_COLUMNS =
  'id, project_id, name, region, size_tib, status, is_lifecycle_independent, cluster_id, created_with_cluster';

export async function insertVolume(
  db: Queryable,
  v: {
    id: string;
    projectId: string;
    name: string;
    region: string;
    sizeTib: number;
    lifecycleIndependent: boolean;
    createdWithCluster?: string;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO cluster_volumes (id, project_id, name, region, size_tib, status, is_lifecycle_independent, created_with_cluster)
     VALUES ($1, $2, $3, $4, $5, 'provisioning', $6, $7)`,
    [v.id, v.projectId, v.name, v.region, v.sizeTib, v.lifecycleIndependent, v.createdWithCluster ?? null],
  );
}

export async function getVolume(db: Queryable, projectId: string, id: string): Promise<VolumeRow | null> {
  const { rows } = await db.query<VolumeRow>(
    `SELECT ${VOLUME_COLUMNS} FROM cluster_volumes WHERE id = $1 AND project_id = $2`,
    [id, projectId],
  );
  return rows[0] ?? null;
}

export async function findVolume(db: Queryable, id: string): Promise<VolumeRow | null> {
  const { rows } = await db.query<VolumeRow>(`SELECT ${VOLUME_COLUMNS} FROM cluster_volumes WHERE id = $1`, [id]);
  return rows[0] ?? null;
}

export async function listVolumes(db: Queryable, projectId: string): Promise<VolumeRow[]> {
  const { rows } = await db.query<VolumeRow>(
    `SELECT ${VOLUME_COLUMNS} FROM cluster_volumes WHERE project_id = $1 ORDER BY created_at DESC`,
    [projectId],
  );
  return rows;
}

export async function volumesOfCluster(db: Queryable, clusterId: string): Promise<VolumeRow[]> {
  return (await volumesOfClusters(db, [clusterId])).get(clusterId) ?? [];
}

/** The volumes of many clusters in one query, each cluster's oldest first. */
export async function volumesOfClusters(db: Queryable, clusterIds: string[]): Promise<Map<string, VolumeRow[]>> {
  const { rows } = await db.query<VolumeRow>(
    `SELECT ${VOLUME_COLUMNS} FROM cluster_volumes WHERE cluster_id = ANY($1) ORDER BY created_at`,
    [clusterIds],
  );
  const byCluster = new Map<string, VolumeRow[]>();
  for (const v of rows) {
    const list = byCluster.get(v.cluster_id!);
    if (list) list.push(v);
    else byCluster.set(v.cluster_id!, [v]);
  }
  return byCluster;
}

export async function setVolumeStatus(
  db: Queryable,
  id: string,
  status: VolumeRow['status'],
  clusterId: string | null | undefined = undefined,
): Promise<void> {
  if (clusterId === undefined) {
    await db.query('UPDATE cluster_volumes SET status = $2, updated_at = now() WHERE id = $1', [id, status]);
  } else {
    await db.query('UPDATE cluster_volumes SET status = $2, cluster_id = $3, updated_at = now() WHERE id = $1', [
      id,
      status,
      clusterId,
    ]);
  }
}

export async function resizeVolume(db: Queryable, id: string, sizeTib: number): Promise<void> {
  await db.query('UPDATE cluster_volumes SET size_tib = $2, updated_at = now() WHERE id = $1', [id, sizeTib]);
}

export async function deleteVolumeRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM cluster_volumes WHERE id = $1', [id]);
}

// ---- remediations ----

export async function upsertRemediation(db: Queryable, r: Remediation): Promise<void> {
  await db.query(
    `INSERT INTO cluster_remediations (id, cluster_id, instance_id, state, mode, trigger, doc, create_time, update_time)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (id) DO UPDATE
       SET state = EXCLUDED.state, mode = EXCLUDED.mode, doc = EXCLUDED.doc, update_time = EXCLUDED.update_time
     WHERE cluster_remediations.update_time <= EXCLUDED.update_time`,
    [r.id, r.cluster_id, r.instance_id, r.state, r.mode, r.trigger, r, r.create_time, r.update_time],
  );
}

export async function getRemediation(
  db: Queryable,
  clusterId: string,
  instanceId: string,
  id: string,
): Promise<Remediation | null> {
  const { rows } = await db.query<{ doc: Remediation }>(
    'SELECT doc FROM cluster_remediations WHERE id = $1 AND cluster_id = $2 AND instance_id = $3',
    [id, clusterId, instanceId],
  );
  return rows[0]?.doc ?? null;
}

export async function listRemediations(
  db: Queryable,
  f: {
    clusterId: string;
    instanceId?: string;
    states?: RemediationState[];
    modes?: RemediationMode[];
    triggers?: RemediationTrigger[];
    newestFirst: boolean;
    limit: number;
    offset: number;
  },
): Promise<Remediation[]> {
  const { rows } = await db.query<{ doc: Remediation }>(
    `SELECT doc FROM cluster_remediations
      WHERE cluster_id = $1
        AND ($2::text IS NULL OR instance_id = $2)
        AND ($3::text[] IS NULL OR state = ANY($3))
        AND ($4::text[] IS NULL OR mode = ANY($4))
        AND ($5::text[] IS NULL OR trigger = ANY($5))
      ORDER BY create_time ${f.newestFirst ? 'DESC' : 'ASC'}, id
      LIMIT $6 OFFSET $7`,
    [f.clusterId, f.instanceId ?? null, f.states ?? null, f.modes ?? null, f.triggers ?? null, f.limit, f.offset],
  );
  return rows.map((r) => r.doc);
}
