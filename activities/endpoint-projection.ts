/**
 * Endpoint events from the container deployments that serve endpoint
 * deployments: the deployment workflow projects its state as it goes, and a
 * change of status or of the desired replica count becomes an event of the
 * endpoint (scaling, ready, failed, scaled to zero), so everything a
 * deployment does is in the endpoint's event list without the workflow
 * knowing about endpoints.
 */
import type { DeploymentState } from '../shared/deployments';
import { addEndpointEvent, deleteEndpointDeploymentRow, endpointDeploymentOfContainer } from '../db/endpoints';
import type { Queryable } from '../db/pool';

export interface ContainerSnapshot {
  status: string;
  desired: number;
}

/**
 * The deployment's status and desired replicas before a projection writes them. Read with the lock
 * the projection's UPDATE takes anyway (FOR NO KEY UPDATE, which leaves rows that reference the
 * deployment free to be written), in its transaction: two projections of one deployment at once (a
 * retried activity beside the next) then each compare against what the other wrote, and say a
 * change once.
 */
export async function containerSnapshot(db: Queryable, deploymentId: string): Promise<ContainerSnapshot | null> {
  const { rows } = await db.query<{ status: string; desired: number | null }>(
    `SELECT status, (state->>'desired_replicas')::int AS desired FROM deployments WHERE id = $1 FOR NO KEY UPDATE`,
    [deploymentId],
  );
  return rows[0] ? { status: rows[0].status, desired: rows[0].desired ?? 0 } : null;
}

const STATUS_EVENTS: Record<
  string,
  { type: string; level: 'LEVEL_INFO' | 'LEVEL_WARN' | 'LEVEL_ERROR'; message: string }
> = {
  Ready: { type: 'deployment.ready', level: 'LEVEL_INFO', message: 'Every desired replica is ready and serving.' },
  Failed: { type: 'deployment.failed', level: 'LEVEL_ERROR', message: 'Replicas keep failing to start.' },
  ScaledToZero: {
    type: 'deployment.scaled_to_zero',
    level: 'LEVEL_INFO',
    message: 'Idle: scaled to zero replicas; the next request wakes it.',
  },
  Scaling: { type: 'deployment.scaling', level: 'LEVEL_INFO', message: 'Scaling.' },
  Updating: { type: 'deployment.updating', level: 'LEVEL_INFO', message: 'Replicas are being started or rolled.' },
};

export async function noteContainerChange(
  db: Queryable,
  deploymentId: string,
  before: ContainerSnapshot | null,
  after: DeploymentState,
): Promise<void> {
  const link = await endpointDeploymentOfContainer(db, deploymentId);
  if (!link) return;
  const base = { endpointId: link.endpoint_id, deploymentId: link.id, sourceKind: 'SOURCE_KIND_DEPLOYMENT' as const };
  if (before && before.desired !== after.desired_replicas) {
    await addEndpointEvent(db, {
      ...base,
      level: 'LEVEL_INFO',
      type: 'deployment.replicas_changed',
      message: `Desired replicas ${before.desired} -> ${after.desired_replicas}.`,
      oldReplicas: before.desired,
      newReplicas: after.desired_replicas,
    });
  }
  if (!before || before.status !== after.status) {
    const e = STATUS_EVENTS[after.status];
    if (e) await addEndpointEvent(db, { ...base, ...e, status: after.status });
  }
}

/** The container deployment is gone: an endpoint deployment being deleted goes with it. */
export async function noteContainerRemoved(db: Queryable, deploymentId: string): Promise<void> {
  const link = await endpointDeploymentOfContainer(db, deploymentId);
  if (!link) return;
  await addEndpointEvent(db, {
    endpointId: link.endpoint_id,
    deploymentId: link.id,
    sourceKind: 'SOURCE_KIND_DEPLOYMENT',
    level: 'LEVEL_INFO',
    type: 'deployment.deleted',
    message: 'Every replica stopped; the deployment is deleted.',
    status: 'DEPLOYMENT_STATE_STOPPED',
  });
  if (link.deleting) await deleteEndpointDeploymentRow(db, link.id);
}
