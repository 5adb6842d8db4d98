/**
 * Meters for usage that accrues over time, reconciled from the state the
 * workflows project: a cluster's GPUs by the capacity they came from, and a
 * container deployment's running replicas. Reconciling is idempotent
 * (db/usage.ts setMeter), so it runs on every projection.
 *
 * Reserved GPUs are prepaid: when a RESERVED cluster first becomes ready,
 * its reserved GPUs are charged for the whole reservation (duration_days);
 * raising num_reserved_gpus later prepays the added GPUs for what remains of
 * it. Every other GPU is metered by the hour while its node exists.
 */
import Decimal from 'decimal.js';
import { GPUS_PER_NODE, type ClusterState, type NodeCapacity } from '../shared/clusters';
import { CAPACITY_BILLING, GPU_HOUR_PRICES, PRODUCTS, replicaHourPrice } from '../shared/pricing';
import type { Db } from '../db/pool';
import { recordUsage, setMeter, setMeters, stopMeters, type Meter } from '../db/usage';

const METERED: NodeCapacity[] = ['on_demand', 'capacity_pool', 'preemptible'];
const HOUR_MS = 3_600_000;

async function projectOf(db: Db, table: 'clusters' | 'deployments', id: string): Promise<string | null> {
  const { rows } = await db.query<{ project_id: string }>(`SELECT project_id FROM ${table} WHERE id = $1`, [id]);
  return rows[0]?.project_id ?? null;
}

/**
 * Reconciles a cluster's meters with a state just projected. `projectId` is the cluster's project
 * when the projection wrote this state, null when it did not: a newer state is there (and was
 * metered by its own projection), or the cluster's row is gone (its meters stop).
 */
export async function meterCluster(
  db: Db,
  clusterId: string,
  state: ClusterState,
  projectId: string | null,
): Promise<void> {
  const prefix = `cluster/${clusterId}/`;
  if (projectId === null) {
    if (await projectOf(db, 'clusters', clusterId)) return;
    return stopMeters(db, prefix);
  }
  if (state.deleted_at) return stopMeters(db, prefix);
  const { spec } = state;
  const gpus = new Map<NodeCapacity, number>();
  for (const node of state.gpu_worker_nodes) gpus.set(node.capacity, (gpus.get(node.capacity) ?? 0) + node.num_gpus);
  const dims = (capacity: NodeCapacity) => ({
    gpu_type: spec.gpu_type,
    region: spec.region,
    billing_type: CAPACITY_BILLING[capacity].billingType,
  });
  await setMeters(
    db,
    METERED.map((capacity) => {
      const count = gpus.get(capacity) ?? 0;
      const meter: Meter | null =
        count > 0
          ? {
              projectId,
              product: CAPACITY_BILLING[capacity].product,
              resourceId: clusterId,
              units: count,
              unit: 'GPU-hour',
              unitPrice: GPU_HOUR_PRICES[spec.gpu_type][capacity],
              dimensions: dims(capacity),
              attributes: { cluster_name: spec.cluster_name },
            }
          : null;
      return [prefix + capacity, meter];
    }),
  );
  await prepayReservation(db, clusterId, projectId, state, dims('reserved'));
}

async function prepayReservation(
  db: Db,
  clusterId: string,
  projectId: string,
  state: ClusterState,
  dimensions: Record<string, string>,
): Promise<void> {
  const { spec, counts } = state;
  if (spec.billing_type !== 'RESERVED' || !state.first_ready_at || !spec.duration_days) return;
  const reserved = Math.ceil(counts.num_reserved_gpus / GPUS_PER_NODE) * GPUS_PER_NODE;
  const { rows } = await db.query<{ prepaid: number | null }>(
    `SELECT max((dimensions->>'reserved_gpus')::int) AS prepaid FROM usage_records
      WHERE starts_with(idempotency_key, $1)`,
    [`cluster/${clusterId}/prepaid/`],
  );
  const prepaid = rows[0].prepaid ?? 0;
  if (reserved <= prepaid) return;
  const start = Date.parse(state.first_ready_at);
  const end = start + spec.duration_days * 24 * HOUR_MS;
  const from = Math.max(start, prepaid === 0 ? start : Date.now());
  if (from >= end) return;
  const hours = new Decimal(end - from).div(HOUR_MS).toDecimalPlaces(6, Decimal.ROUND_HALF_UP);
  await recordUsage(db, {
    projectId,
    product: CAPACITY_BILLING.reserved.product,
    resourceId: clusterId,
    quantity: hours.mul(reserved - prepaid),
    unit: 'GPU-hour',
    unitPrice: GPU_HOUR_PRICES[spec.gpu_type].reserved,
    dimensions: { ...dimensions, reserved_gpus: String(reserved) },
    attributes: {
      cluster_name: spec.cluster_name,
      reservation_start: new Date(start).toISOString(),
      reservation_end: new Date(end).toISOString(),
    },
    occurredAt: new Date(from),
    idempotencyKey: `cluster/${clusterId}/prepaid/${reserved}`,
  });
}

/** A replica costs while it runs. */
export async function meterReplica(
  db: Db,
  r: { deploymentId: string; replicaId: string; status: string },
): Promise<void> {
  const key = `replica/${r.deploymentId}/${r.replicaId}`;
  if (r.status !== 'Running') return setMeter(db, key, null);
  const { rows } = await db.query<{
    project_id: string;
    name: string;
    spec: { gpu_count?: number; gpu_type?: string };
  }>('SELECT project_id, name, spec FROM deployments WHERE id = $1', [r.deploymentId]);
  const d = rows[0];
  if (!d) return setMeter(db, key, null);
  const gpuCount = d.spec.gpu_count ?? 0;
  await setMeter(db, key, {
    projectId: d.project_id,
    product: PRODUCTS.replicaHours,
    resourceId: r.deploymentId,
    units: 1,
    unit: 'replica-hour',
    unitPrice: replicaHourPrice(gpuCount),
    dimensions: { gpu_type: d.spec.gpu_type ?? 'none', gpu_count: String(gpuCount) },
    attributes: { deployment_name: d.name, replica_id: r.replicaId },
  });
}

export const stopDeploymentMeters = (db: Db, deploymentId: string) => stopMeters(db, `replica/${deploymentId}/`);
