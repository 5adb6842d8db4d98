/**
 * Creating a container deployment (its row, then its entity workflow), and tearing down one whose
 * workflow ended without deleting it. Used by the deployments API and by endpoint deployments,
 * whose replicas run a model server.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { deleteDeploymentRow, insertDeployment, listReplicas, type DeploymentRow } from '../../db/deployments';
import { newId } from '../../platform/ids';
import { deploymentWorkflowId, type DeploymentSpec, type DeploymentWorkflowInput } from '../../shared/deployments';
import { deployment } from '../../workflows/deployments';
import type { ApiDeps } from '../deps';
import { startResourceWorkflow } from '../workflows';

/**
 * Creates a container deployment: its row, then its entity workflow
 * `deployment/<id>` (the row goes again if the workflow cannot start). Used by
 * the deployments API and by endpoint deployments, whose replicas run a model server.
 */
export async function startContainerDeployment(
  deps: ApiDeps,
  d: {
    projectId: string;
    /** The project's slug, for the operators' memo. */
    projectSlug: string;
    apiKeyId: string;
    spec: DeploymentSpec;
    /** Runs once the row exists, before the workflow starts (to link the deployment to what it serves). */
    beforeStart?: (id: string) => Promise<void>;
  },
): Promise<string> {
  const { db, temporal, config } = deps;
  const spec = d.spec;
  const id = newId('dep');
  const input: DeploymentWorkflowInput = {
    deploymentId: id,
    projectId: d.projectId,
    spec,
    maxRestartBackoffSeconds: config.deploymentMaxRestartBackoffSeconds,
    autoscaleIntervalSeconds: config.deploymentAutoscaleIntervalSeconds,
    autoscaleCooldownSeconds: config.deploymentAutoscaleCooldownSeconds,
    maxRoundsPerRun: config.deploymentRoundsPerRun,
    containerWaitSeconds: config.containerQueueWaitSeconds,
  };
  await insertDeployment(db, {
    id,
    projectId: d.projectId,
    name: spec.name,
    workflowId: deploymentWorkflowId(id),
    state: { revision: 1, spec, desired_replicas: spec.min_replicas, status: 'Updating', deleted: false },
  });
  try {
    await d.beforeStart?.(id);
    await startResourceWorkflow(temporal, {
      workflow: deployment,
      workflowId: deploymentWorkflowId(id),
      args: [input],
      projectId: d.projectId,
      resourceType: 'deployment',
      resourceId: id,
      status: 'Updating',
      names: { projectSlug: d.projectSlug, resource: spec.name },
      summary: `Deployment ${spec.name} (${id}): ${spec.min_replicas} replica(s) of ${spec.image}`,
      details: `Created by API key \`${d.apiKeyId}\`; command ${JSON.stringify([...(spec.command ?? []), ...(spec.args ?? [])])}.`,
    });
  } catch (err) {
    await deleteDeploymentRow(db, id);
    throw err;
  }
  return id;
}

/**
 * Starts a run of a deployment whose workflow ended without deleting it (it failed, or was
 * terminated from the Temporal UI) that goes straight to deletion: it re-attaches to the replicas
 * its row still lists as running, stops them, and removes the deployment. (Replicas nobody
 * re-attaches to are stopped by their host after GANTRY_REPLICA_ADOPTION_SECONDS anyway.)
 */
export async function tearDownOrphanedDeployment(deps: ApiDeps, row: DeploymentRow): Promise<void> {
  const { db, temporal, config } = deps;
  const replicas = (await listReplicas(db, row.id))
    .filter((r) => (r.status === 'Running' || r.status === 'Starting') && r.host)
    .map((r) => ({ replicaId: r.replica_id, revision: r.revision, hostQueue: r.host!, image: r.image }));
  const input: DeploymentWorkflowInput = {
    deploymentId: row.id,
    projectId: row.project_id,
    spec: row.state.spec,
    maxRestartBackoffSeconds: config.deploymentMaxRestartBackoffSeconds,
    containerWaitSeconds: config.containerQueueWaitSeconds,
    // Its projections come after every one of the run that ended.
    carried: { state: row.state, generation: row.generation, seq: 0, failures: 0, lastScaleAt: 0, replicas },
    deleteOnStart: 'deleted through the API after its workflow had ended',
  };
  try {
    await startResourceWorkflow(temporal, {
      workflow: deployment,
      workflowId: deploymentWorkflowId(row.id),
      args: [input],
      projectId: row.project_id,
      resourceType: 'deployment',
      resourceId: row.id,
      status: 'Updating',
      summary: `Deletion of deployment ${row.name} (${row.id}), whose workflow had ended`,
      details: `Its last run ended without deleting it; this run stops the ${replicas.length} replica(s) it left and removes it.`,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err; // a concurrent DELETE started it
  }
}
