/**
 * Updates and Signals to a cluster's entity workflow, through their definitions in
 * workflows/clusters.ts. A refused Update is the API error the validator meant
 * (api/workflows.ts updateRejection); a cluster whose workflow is gone is a 409 that says so.
 */
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { SignalDefinition, UpdateDefinition } from '@temporalio/common';
import { clusterWorkflowId } from '../shared/clusters';
import { conflict } from './errors';
import { executeEntityUpdate, signalWorkflow } from './workflows';

export async function updateCluster<Ret, Arg>(
  temporal: Client,
  clusterId: string,
  update: UpdateDefinition<Ret, [Arg]>,
  arg: Arg,
  idempotencyKey?: string,
): Promise<Ret> {
  try {
    return await executeEntityUpdate(temporal, clusterWorkflowId(clusterId), update, [arg], idempotencyKey);
  } catch (err) {
    throw notRunning(err, clusterId);
  }
}

export async function signalCluster<Arg>(
  temporal: Client,
  clusterId: string,
  signal: SignalDefinition<[Arg]>,
  arg: Arg,
): Promise<void> {
  try {
    await signalWorkflow(temporal, clusterWorkflowId(clusterId), signal, [arg]);
  } catch (err) {
    throw notRunning(err, clusterId);
  }
}

function notRunning(err: unknown, clusterId: string): unknown {
  if (err instanceof WorkflowNotFoundError) {
    return conflict(
      `Cluster '${clusterId}' is no longer running (it was deleted or its reservation ended).`,
      'cluster_not_running',
    );
  }
  return err;
}
