/**
 * The write paths of container deployments: deploying (its row, then its entity workflow),
 * changing (an Update of that workflow: replicas roll to the new revision), destroying, and
 * tearing down one whose workflow ended without deleting it. Creating is shared with endpoint
 * deployments, whose replicas run a model server.
 */
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type { Principal } from '../../db/accounts';
import {
  deleteDeploymentRow,
  getDeployment,
  getSecret,
  insertDeployment,
  listReplicas,
  type DeploymentRow,
} from '../../db/deployments';
import { newId } from '../../platform/ids';
import { imageAccess, parseImageReference } from '../../shared/image-references';
import { deploymentWorkflowId, type DeploymentSpec, type DeploymentWorkflowInput } from '../../shared/deployments';
import { deleteDeploymentUpdate, deployment, updateDeploymentUpdate } from '../../workflows/deployments';
import type { ApiDeps } from '../deps';
import { pinMounts } from '../deployment-mounts';
import { ApiError, badRequest, conflict, notFound } from '../errors';
import { getRevision, recordRevision, RETAINED_REVISIONS } from '../../db/deployment-revisions';
import { executeEntityUpdate, startResourceWorkflow, startResourceWorkflowOrUndo } from '../workflows';
import { requireReplicaRoom } from './replica-quota';
import { requireWithinReplicaCeilings } from './replica-ceilings';
import { platformImages } from '../../shared/model-server-image';

/**
 * Creates a container deployment: its row, then its entity workflow
 * `deployment/<id>` (the row goes again if the workflow cannot start). Used by
 * the deployments API and by endpoint deployments, whose replicas run a model server.
 */
export async function startContainerDeployment(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  d: {
    projectId: string;
    /** The project's slug, for the operators' memo. */
    projectSlug: string;
    apiKeyId: string;
    spec: DeploymentSpec;
    /** Runs once the row exists, before the workflow starts (to link the deployment to what it serves). */
    beforeStart?: (id: string) => Promise<void>;
    /** The request's field that sets max_replicas, named in a refusal by the replica quota. */
    ceilingParam: string;
  },
): Promise<string> {
  const { db, temporal, config } = deps;
  const spec = d.spec;
  await requireReplicaRoom(db, config.projectMaxReplicas, d.projectId, {
    replicas: spec.max_replicas,
    param: d.ceilingParam,
  });
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
  await recordRevision(db, { deploymentId: id, revision: 1, spec });
  await d.beforeStart?.(id).catch(async (err: unknown) => {
    await deleteDeploymentRow(db, id);
    throw err;
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
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
    },
    () => deleteDeploymentRow(db, id),
  );
  return id;
}

/**
 * Starts a run of a deployment whose workflow ended without deleting it (it failed, or was
 * terminated from the Temporal UI) that goes straight to deletion: it re-attaches to the replicas
 * its row still lists as running, stops them, and removes the deployment. (Replicas nobody
 * re-attaches to are stopped by their host after GANTRY_REPLICA_ADOPTION_SECONDS anyway.)
 */
export async function tearDownOrphanedDeployment(deps: ApiDeps, row: DeploymentRow): Promise<void> {
  await startRunOfEndedDeployment(deps, row, {
    deleteOnStart: 'deleted through the API after its workflow had ended',
    summary: `Deletion of deployment ${row.name} (${row.id}), whose workflow had ended`,
    details: (n) =>
      `Its last run ended without deleting it; this run stops the ${n} replica(s) it left and removes it.`,
  });
}

/**
 * Starts a new run of a deployment whose workflow ended without deleting it, to keep serving: it
 * carries on from the state its row holds and re-attaches to the replicas the row lists as running
 * (one that is gone is replaced, as after any hand-over). For deployments the installation keeps
 * itself (the serverless pools), which nobody would otherwise bring back.
 */
export async function resumeEndedDeployment(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  row: DeploymentRow,
): Promise<void> {
  await startRunOfEndedDeployment(deps, row, {
    summary: `Deployment ${row.name} (${row.id}), resumed after its workflow had ended`,
    details: (n) => `Its last run ended without deleting it; this run carries on with the ${n} replica(s) it left.`,
  });
}

/**
 * A new run of a deployment whose workflow ended, carrying on from its row: its state, and the
 * replicas the row lists as running (to re-attach to). A concurrent start of the same run wins.
 */
async function startRunOfEndedDeployment(
  { db, temporal, config }: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  row: DeploymentRow,
  run: { deleteOnStart?: string; summary: string; details: (replicas: number) => string },
): Promise<void> {
  const replicas = (await listReplicas(db, row.id))
    .filter((r) => (r.status === 'Running' || r.status === 'Starting') && r.host)
    .map((r) => ({ replicaId: r.replica_id, revision: r.revision, hostQueue: r.host!, image: r.image }));
  const input: DeploymentWorkflowInput = {
    deploymentId: row.id,
    projectId: row.project_id,
    spec: row.state.spec,
    maxRestartBackoffSeconds: config.deploymentMaxRestartBackoffSeconds,
    autoscaleIntervalSeconds: config.deploymentAutoscaleIntervalSeconds,
    autoscaleCooldownSeconds: config.deploymentAutoscaleCooldownSeconds,
    maxRoundsPerRun: config.deploymentRoundsPerRun,
    containerWaitSeconds: config.containerQueueWaitSeconds,
    // Its projections come after every one of the run that ended.
    carried: { state: row.state, generation: row.generation, seq: 0, failures: 0, lastScaleAt: 0, replicas },
    ...(run.deleteOnStart ? { deleteOnStart: run.deleteOnStart } : {}),
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
      summary: run.summary,
      details: run.details(replicas.length),
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err; // another request or process started it
  }
}

/** What a deploy request gives: the spec, with max_replicas optional (it defaults to min_replicas, at least 1). */
export type DeployRequest = Omit<DeploymentSpec, 'max_replicas'> & { max_replicas?: number };

/** Checks a deploy request (replica bounds, secrets, mounts, a free name) and starts the deployment; its id. */
export async function deployContainer(deps: ApiDeps, principal: Principal, body: DeployRequest): Promise<string> {
  const { db } = deps;
  const spec: DeploymentSpec = { ...body, max_replicas: body.max_replicas ?? Math.max(body.min_replicas, 1) };
  if (spec.max_replicas < spec.min_replicas)
    throw badRequest('max_replicas must be at least min_replicas.', 'max_replicas');
  requireWithinReplicaCeilings(spec, deps.config.replicaMaxLimits);
  checkImage(deps, principal, spec.image);
  await checkSecrets(db, principal.projectId, spec.environment_variables);
  Object.assign(spec, await pinMounts(db, principal.projectId, spec));
  if (await getDeployment(db, principal.projectId, body.name)) {
    throw conflict(`A deployment named '${body.name}' already exists in this project.`, 'deployment_exists');
  }
  return startContainerDeployment(deps, {
    projectId: principal.projectId,
    projectSlug: principal.projectSlug,
    apiKeyId: principal.apiKeyId,
    spec,
    ceilingParam: 'max_replicas',
  });
}

/** Changes a deployment's spec (fields left out keep their value); its workflow rolls the replicas. */
export async function changeContainerDeployment(
  deps: ApiDeps,
  principal: Principal,
  row: DeploymentRow,
  change: Partial<DeploymentSpec>,
  idempotencyKey?: string,
): Promise<void> {
  const { db, temporal } = deps;
  const patch = Object.fromEntries(
    Object.entries(change).filter(([, v]) => v !== undefined),
  ) as Partial<DeploymentSpec>;
  const next = { ...row.state.spec, ...patch };
  // What this change (or the revision a rollback re-applies) asks for; a value it leaves as it was is kept.
  requireWithinReplicaCeilings(patch, deps.config.replicaMaxLimits);
  if (next.max_replicas < next.min_replicas)
    throw badRequest('max_replicas must be at least min_replicas.', 'max_replicas');
  if (next.max_replicas > row.state.spec.max_replicas) {
    await requireReplicaRoom(db, deps.config.projectMaxReplicas, principal.projectId, {
      replicas: next.max_replicas,
      param: 'max_replicas',
      replacing: row.id,
    });
  }
  if (patch.image !== undefined) checkImage(deps, principal, patch.image);
  if (patch.environment_variables) await checkSecrets(db, principal.projectId, patch.environment_variables);
  if (patch.volumes || patch.model_mounts) {
    const pinned = await pinMounts(db, principal.projectId, { volumes: next.volumes, model_mounts: next.model_mounts });
    if (patch.volumes) patch.volumes = pinned.volumes;
    if (patch.model_mounts) patch.model_mounts = pinned.model_mounts;
  }
  if (patch.name && patch.name !== row.name && (await getDeployment(db, principal.projectId, patch.name))) {
    throw conflict(`A deployment named '${patch.name}' already exists in this project.`, 'deployment_exists');
  }
  try {
    await executeEntityUpdate(temporal, deploymentWorkflowId(row.id), updateDeploymentUpdate, [patch], idempotencyKey);
  } catch (err) {
    throw refused(row, err);
  }
}

/**
 * Rolls a deployment back to an earlier revision: that revision's spec (its name aside) is applied
 * as a change, so the workflow rolls the replicas to it as it rolls any change, and the projection
 * records the new revision as a rollback to that one (db/deployment-revisions.ts).
 */
export async function rollbackContainerDeployment(
  deps: ApiDeps,
  principal: Principal,
  row: DeploymentRow,
  revision: number,
  idempotencyKey?: string,
): Promise<void> {
  const target = await getRevision(deps.db, row.id, revision);
  if (!target) {
    throw notFound(
      `Revision ${revision} of deployment '${row.name}' is not kept (the ${RETAINED_REVISIONS} newest are).`,
      'revision_not_found',
    );
  }
  const { name: _name, ...spec } = target.spec;
  // A revision kept from before the API checked images may hold anything (its launch would fail).
  if (!parseImageReference(spec.image))
    throw badRequest(
      `Revision ${revision}'s image is not an OCI image reference ([registry/]repository[:tag][@digest]).`,
      'revision_identifier',
    );
  await changeContainerDeployment(deps, principal, row, spec, idempotencyKey);
}

/** Deletes a deployment through its workflow; one whose workflow had ended is torn down by a new run. */
export async function destroyContainerDeployment(deps: ApiDeps, row: DeploymentRow): Promise<void> {
  try {
    await executeEntityUpdate(deps.temporal, deploymentWorkflowId(row.id), deleteDeploymentUpdate, []);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw refused(row, err);
    await tearDownOrphanedDeployment(deps, row);
  }
}

/**
 * The project may run the image (shared/image-references.ts): not another project's path of the
 * installation's registry (400 naming `image`). Each launch checks again, by pulling with the
 * project's own access (podman-runtime.ts).
 */
function checkImage(deps: ApiDeps, principal: Principal, image: string) {
  const access = imageAccess(image, {
    installationRegistry: deps.config.imageRegistry,
    projectSlug: principal.projectSlug,
    platformImages: platformImages(deps.config),
  });
  if (access.kind === 'foreign' || access.kind === 'invalid')
    throw badRequest(`This project may not run the image ${image}: ${access.why}.`, 'image');
}

/** Every secret the environment names must exist in the project (400 naming the variable). */
async function checkSecrets(db: ApiDeps['db'], projectId: string, env: DeploymentSpec['environment_variables']) {
  for (const [i, e] of env.entries()) {
    if (e.value_from_secret && !(await getSecret(db, projectId, e.value_from_secret))) {
      throw badRequest(
        `Secret '${e.value_from_secret}' does not exist in this project.`,
        `environment_variables[${i}].value_from_secret`,
      );
    }
  }
}

/** The workflow's refusal of an Update (or its absence) as the 409 the caller sees. */
function refused(row: DeploymentRow, err: unknown): unknown {
  // executeEntityUpdate gives the validator's refusal as the 400 (the field it names) or 409 it means.
  if (err instanceof ApiError) return err;
  return conflict(`Deployment '${row.name}' does not take changes now: ${(err as Error).message}`);
}
