/**
 * Sending Updates and Signals to a cluster's entity workflow, and turning a
 * rejected update into the API error the caller should see: the workflow's
 * validator names the field (400), a missing thing (404) or a state conflict (409).
 */
import { WorkflowNotFoundError, WorkflowUpdateFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { UPDATE_REJECTIONS, clusterWorkflowId } from '../common/clusters';
import { badRequest, conflict, notFound } from './errors';
import { TEMPORAL_CALL_DEADLINE_MS } from './workflows';

// An update waits for its handler (which writes PostgreSQL): allow more than a plain call.
const UPDATE_DEADLINE_MS = TEMPORAL_CALL_DEADLINE_MS * 6;

export async function updateCluster<R>(temporal: Client, clusterId: string, name: string, arg: unknown): Promise<R> {
  const handle = temporal.workflow.getHandle(clusterWorkflowId(clusterId));
  for (let attempt = 1; ; attempt++) {
    try {
      return await temporal.connection.withDeadline(Date.now() + UPDATE_DEADLINE_MS, () =>
        handle.executeUpdate<R, [unknown]>(name, { args: [arg] }),
      );
    } catch (err) {
      // An entity workflow that is continuing as new is briefly "not found": try the next run.
      if (err instanceof WorkflowNotFoundError && attempt < 4) {
        await new Promise((r) => setTimeout(r, 250 * attempt));
        continue;
      }
      throw rejection(err, clusterId);
    }
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
  if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
    const f = err.cause;
    const param = typeof f.details?.[0] === 'string' ? (f.details[0] as string) : null;
    if (f.type === UPDATE_REJECTIONS.invalid) return badRequest(f.message, param);
    if (f.type === UPDATE_REJECTIONS.notFound) return notFound(f.message);
    if (f.type === UPDATE_REJECTIONS.conflict) return conflict(f.message);
  }
  return err;
}
