/**
 * The per-project cap on container replicas (GANTRY_PROJECT_MAX_REPLICAS): what all of a
 * project's deployments may run at their ceiling, the sum of their max_replicas (endpoint
 * deployments' too). Checked when a deployment is made or its ceiling changes, so no autoscaler,
 * restart or wake from zero can take a project past it. Two requests at once can each pass; the
 * overshoot is bounded by them.
 */
import { projectReplicaCeiling } from '../../db/deployments';
import type { Queryable } from '../../db/pool';
import { ApiError } from '../errors';

export async function requireReplicaRoom(
  db: Queryable,
  quota: number,
  projectId: string,
  ceiling: { replicas: number; param: string; replacing?: string },
): Promise<void> {
  if (quota <= 0) return;
  const others = await projectReplicaCeiling(db, projectId, ceiling.replacing);
  if (others + ceiling.replicas > quota) {
    throw new ApiError(
      403,
      `The project's deployments could run ${others + ceiling.replicas} replicas at their ceilings (max_replicas); ` +
        `its quota is ${quota} (${others} taken by its other deployments). Lower a ceiling, or delete a deployment.`,
      'permission_error',
      ceiling.param,
      'replica_quota_exceeded',
    );
  }
}
