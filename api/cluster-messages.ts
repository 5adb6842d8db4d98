/**
 * Sending Updates and Signals to a cluster's entity workflow, and turning a
 * rejected update into the API error the caller should see: the workflow's
 * validator names the field (400), a missing thing (404) or a state conflict (409).
 */
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { UPDATE_REJECTIONS, clusterWorkflowId } from '../shared/clusters';
import { badRequest, conflict, notFound } from './errors';
import { executeEntityUpdate, TEMPORAL_CALL_DEADLINE_MS } from './workflows';

export async function updateCluster<R>(
  temporal: Client,
  clusterId: string,
  name: string,
  arg: unknown,
  idempotencyKey?: string,
): Promise<R> {
  try {
    return await executeEntityUpdate<R>(temporal, clusterWorkflowId(clusterId), name, [arg], idempotencyKey);
  } catch (err) {
    throw rejection(err, clusterId);
  }
}

export async function signalCluster(temporal: Client, clusterId: string, name: string, arg: unknown): Promise<void> {
  const handle = temporal.workflow.getHandle(clusterWorkflowId(clusterId));
  try {
    await temporal.connection.withDeadline(Date.now() + TEMPORAL_CALL_DEADLINE_MS, () => handle.signal(name, arg));
  } catch (err) {
    throw rejection(err, clusterId);
  }
}

function rejection(err: unknown, clusterId: string): unknown {
  if (err instanceof WorkflowNotFoundError) {
    return conflict(
      `Cluster '${clusterId}' is no longer running (it was deleted or its reservation ended).`,
      'cluster_not_running',
    );
  }
  return updateRejection(err);
}

/** An entity workflow's rejected Update as the API error its validator meant (400, 404 or 409); other errors as they are. */
export function updateRejection(err: unknown): unknown {
  if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
    const f = err.cause;
    const param = typeof f.details?.[0] === 'string' ? (f.details[0] as string) : null;
    if (f.type === UPDATE_REJECTIONS.invalid) return badRequest(f.message, param);
    if (f.type === UPDATE_REJECTIONS.notFound) return notFound(f.message);
    if (f.type === UPDATE_REJECTIONS.conflict) return conflict(f.message);
  }
  return err;
}
