/**
 * The write paths of dedicated endpoints that do more than one thing: creating and changing an
 * endpoint, and deploying, changing and deleting a deployment behind it. The routes
 * (api/routes/endpoints.ts) parse, call one of these, and present the result. A row change and
 * the event that reports it are written in one transaction; a deployment's row comes before its
 * container deployment's workflow, and goes again if that cannot start (docs/decisions/0001).
 */
import type { Principal } from '../../db/accounts';
import {
  addEndpointEvent,
  deleteEndpointDeploymentRow,
  getEndpoint,
  getEndpointDeployment,
  insertEndpoint,
  insertEndpointDeployment,
  linkContainerDeployment,
  updateEndpoint,
  updateEndpointDeployment,
  type EndpointDeploymentRow,
  type EndpointRow,
} from '../../db/endpoints';
import { listModelConfigs, type ModelConfigRow } from '../../db/model-configs';
import { withTransaction, type Db } from '../../db/pool';
import { activeRolloutOf } from '../../db/rollouts';
import { findCatalogModel } from '../../fine-tunes/models';
import { newId } from '../../platform/ids';
import { deploymentWorkflowId } from '../../shared/deployments';
import { deleteDeploymentUpdate, updateDeploymentUpdate } from '../../workflows/deployments';
import type { ApiDeps } from '../deps';
import {
  modelServerSpec,
  planServing,
  profileArgs,
  servingContainerName,
  type EndpointAutoscaling,
  type ServingPlan,
} from '../endpoint-serving';
import { badRequest, conflict } from '../errors';
import { executeEntityUpdate } from '../workflows';
import { startContainerDeployment } from './container-deployments';
import { requireReplicaRoom } from './replica-quota';

type Visibility = EndpointRow['visibility'];

export async function createEndpoint(
  db: Db,
  principal: Principal,
  e: { name: string; visibility?: Visibility },
): Promise<EndpointRow> {
  if (await getEndpoint(db, principal.projectId, e.name))
    throw conflict(`An endpoint named '${e.name}' exists in this project.`, 'endpoint_exists');
  const id = newId('ep', '_');
  await withTransaction(db, async (tx) => {
    await insertEndpoint(tx, {
      id,
      projectId: principal.projectId,
      name: e.name,
      visibility: e.visibility ?? 'VISIBILITY_PRIVATE',
    });
    await addEndpointEvent(tx, {
      endpointId: id,
      level: 'LEVEL_INFO',
      sourceKind: 'SOURCE_KIND_ENDPOINT',
      type: 'endpoint.created',
      message: `Endpoint ${principal.projectSlug}/${e.name} created by API key ${principal.apiKeyId}.`,
    });
  });
  return (await getEndpoint(db, principal.projectId, id))!;
}

/** Renames, re-scopes or re-splits an endpoint; a new split is reported as an event. */
export async function changeEndpoint(
  db: Db,
  principal: Principal,
  e: EndpointRow,
  deployments: EndpointDeploymentRow[],
  change: {
    name?: string;
    visibility?: Visibility;
    trafficSplit?: Array<{ deploymentId: string; weight: number }>;
  },
): Promise<EndpointRow> {
  if (change.trafficSplit && e.active_rollout_id)
    throw conflict(
      `Rollout ${e.active_rollout_id} is moving this endpoint's traffic; pause, promote or cancel it before setting the split.`,
      'rollout_active',
    );
  for (const [i, s] of (change.trafficSplit ?? []).entries()) {
    if (!deployments.some((d) => d.id === s.deploymentId))
      throw badRequest(
        `Endpoint '${e.name}' has no deployment '${s.deploymentId}'.`,
        `trafficSplit[${i}].deploymentId`,
      );
  }
  if (change.name && change.name !== e.name && (await getEndpoint(db, principal.projectId, change.name)))
    throw conflict(`An endpoint named '${change.name}' exists in this project.`, 'endpoint_exists');
  await withTransaction(db, async (tx) => {
    await updateEndpoint(tx, e.id, change);
    if (change.trafficSplit) {
      await addEndpointEvent(tx, {
        endpointId: e.id,
        level: 'LEVEL_INFO',
        sourceKind: 'SOURCE_KIND_ENDPOINT',
        type: 'endpoint.traffic_changed',
        message: `Traffic split: ${change.trafficSplit.map((s) => `${s.deploymentId} ${s.weight}`).join(', ') || 'even'}.`,
      });
    }
  });
  return (await getEndpoint(db, principal.projectId, e.id))!;
}

export interface DeploymentRequest {
  name: string;
  autoscaling: EndpointAutoscaling;
  model?: string;
  modelId?: string;
  modelRevisionId?: string;
  enableLora?: boolean;
  config?: string;
  configId?: string;
}

/** What a deployment request resolves to: the model's serving plan, its profile, and the row to write. */
export interface PlannedDeployment {
  plan: ServingPlan;
  profile: ModelConfigRow | null;
  row: {
    endpointId: string;
    projectId: string;
    name: string;
    model: string;
    modelId: string;
    modelRevisionId: string | undefined;
    autoscaling: EndpointAutoscaling;
    enableLora: boolean;
    hardware: string;
    configId: string | undefined;
  };
}

/**
 * Checks a deployment request and resolves what it would run, writing nothing (what validateOnly
 * answers with). `model` is the resource name projects/{project}/models/{id}[/revisions/{revision}]
 * (a catalog model's project is `public`, as its deployment profiles name it); modelId the bare id.
 */
export async function planEndpointDeployment(
  db: Db,
  principal: Principal,
  e: EndpointRow,
  body: DeploymentRequest,
): Promise<PlannedDeployment> {
  const fromName = body.model?.match(/^projects\/([^/]+)\/models\/([^/]+)(?:\/revisions\/([^/]+))?$/);
  if (body.model && !fromName && !body.modelId) {
    throw badRequest(
      'model is a resource name, projects/{projectId}/models/{modelId}[/revisions/{revisionId}]; or give modelId.',
      'model',
    );
  }
  const ownProject = fromName && (fromName[1] === principal.projectId || fromName[1] === principal.projectSlug);
  if (fromName && !ownProject && !(fromName[1] === 'public' && findCatalogModel(fromName[2]!)))
    throw badRequest(`model names another project's model.`, 'model');
  const modelId = body.modelId ?? fromName?.[2];
  if (!modelId) throw badRequest('Give modelId (or model) to deploy.', 'modelId');
  const plan = await planServing(db, principal.projectId, modelId, body.modelRevisionId ?? fromName?.[3]);
  if (!plan)
    throw badRequest(`Model '${modelId}' is neither registered in this project nor a supported base model.`, 'modelId');
  if (await getEndpointDeployment(db, e.id, body.name))
    throw conflict(`Endpoint '${e.name}' has a deployment named '${body.name}'.`, 'deployment_exists');
  const profile = plan.servable ? await chooseProfile(db, principal.projectId, plan, body) : null;
  if (plan.servable && profile) plan.args.push(...profileArgs(profile.selectors));
  const min = body.autoscaling.minReplicas ?? 1;
  if ((body.autoscaling.maxReplicas ?? Math.max(min, 1)) < min)
    throw badRequest('maxReplicas must be at least minReplicas.', 'autoscaling.maxReplicas');
  return {
    plan,
    profile,
    row: {
      endpointId: e.id,
      projectId: principal.projectId,
      name: body.name,
      model: plan.model,
      modelId: plan.modelId,
      modelRevisionId: plan.revisionId,
      autoscaling: body.autoscaling,
      enableLora: body.enableLora ?? false,
      hardware: 'cpu-reference (process runtime)',
      configId: profile?.id,
    },
  };
}

/**
 * The deployment profile a deployment runs with: the one it names (`config` as
 * projects/{p}/configs/{id}, or `configId`), or the family's only one. A family with several
 * needs the choice made explicitly.
 */
async function chooseProfile(
  db: Db,
  projectId: string,
  plan: Extract<ServingPlan, { servable: true }>,
  body: { config?: string; configId?: string },
): Promise<ModelConfigRow | null> {
  const named = body.config?.match(/^projects\/[^/]+\/configs\/(.+)$/)?.[1];
  if (body.config && !named) throw badRequest('config is projects/{projectId}/configs/{configId}.', 'config');
  const wanted = named ?? body.configId;
  const profiles = await listModelConfigs(db, projectId, { family: plan.family, limit: 100 });
  if (wanted) {
    const chosen = profiles.find((c) => c.id === wanted);
    if (!chosen)
      throw badRequest(
        `Config '${wanted}' is not a deployment profile of ${plan.family} that this project can use; its profiles: ${profiles.map((c) => c.id).join(', ') || 'none'}.`,
        body.config ? 'config' : 'configId',
      );
    return chosen;
  }
  if (profiles.length > 1)
    throw badRequest(
      `${plan.model} has ${profiles.length} deployment profiles (${profiles.map((c) => c.id).join(', ')}); name one with config.`,
      'config',
    );
  return profiles[0] ?? null;
}

/**
 * Creates a planned deployment: its row and event; for a servable model, then its container
 * deployment running the model server (the row goes again if that cannot start). A model that
 * cannot be served is recorded as a failed deployment, with the reason.
 */
export async function createEndpointDeployment(
  deps: ApiDeps,
  principal: Principal,
  planned: PlannedDeployment,
): Promise<EndpointDeploymentRow> {
  const { db, config } = deps;
  const { plan, row } = planned;
  const id = newId('dep', '_');
  const event = { endpointId: row.endpointId, deploymentId: id, sourceKind: 'SOURCE_KIND_DEPLOYMENT' as const };
  if (!plan.servable) {
    await withTransaction(db, async (tx) => {
      await insertEndpointDeployment(tx, { ...row, id, failure: plan.reason });
      await addEndpointEvent(tx, { ...event, level: 'LEVEL_ERROR', type: 'deployment.failed', message: plan.reason });
    });
  } else {
    // The row first (without its server), so the container's first projection finds its endpoint.
    await withTransaction(db, async (tx) => {
      await insertEndpointDeployment(tx, { ...row, id });
      await addEndpointEvent(tx, {
        ...event,
        level: 'LEVEL_INFO',
        type: 'deployment.created',
        message: `Deploying ${plan.model}${plan.revisionId ? ` (revision ${plan.revisionId})` : ''}.`,
      });
    });
    // Its container deployment undoes its own rows when its workflow cannot start; this row goes too.
    await startContainerDeployment(deps, {
      projectId: principal.projectId,
      projectSlug: principal.projectSlug,
      apiKeyId: principal.apiKeyId,
      spec: modelServerSpec(config, { containerName: servingContainerName(id), plan, autoscaling: row.autoscaling }),
      beforeStart: (containerId) => linkContainerDeployment(db, id, containerId),
      ceilingParam: 'autoscaling.maxReplicas',
    }).catch(async (err: unknown) => {
      await deleteEndpointDeploymentRow(db, id);
      throw err;
    });
  }
  return (await getEndpointDeployment(db, row.endpointId, id))!;
}

/**
 * Renames a deployment or changes its autoscaling (what an update leaves out of autoscaling keeps
 * its value). Bounds of 0..0 are how a deployment is paused (DEPLOYMENT_STATE_STOPPED); raising
 * them resumes it, and either is reported as an event.
 */
export async function changeEndpointDeployment(
  deps: ApiDeps,
  principal: Principal,
  d: EndpointDeploymentRow,
  change: { name?: string; autoscaling?: EndpointAutoscaling },
  idempotencyKey?: string,
): Promise<EndpointDeploymentRow> {
  const { db, temporal, config } = deps;
  const autoscaling = change.autoscaling && { ...(d.autoscaling as EndpointAutoscaling), ...change.autoscaling };
  if (d.deleting) {
    // A deployment on its way out is stopping already: asking it to stop (bounds 0..0, what
    // the CLI's `endpoints rm --force` sends before deleting) is satisfied; other changes are not.
    const onlyStops = change.name === undefined && autoscaling !== undefined && Number(autoscaling.maxReplicas) < 1;
    if (onlyStops) return d;
    throw conflict(`Deployment '${d.name}' is being deleted; it takes no changes.`, 'deployment_deleting');
  }
  if (autoscaling && d.container_deployment_id) {
    const plan = await planServing(db, principal.projectId, d.model_id, d.model_revision_id ?? undefined);
    if (plan?.servable) {
      const spec = modelServerSpec(config, { containerName: servingContainerName(d.id), plan, autoscaling });
      const before = modelServerSpec(config, {
        containerName: servingContainerName(d.id),
        plan,
        autoscaling: d.autoscaling as EndpointAutoscaling,
      });
      if (spec.max_replicas > before.max_replicas) {
        await requireReplicaRoom(db, config.projectMaxReplicas, principal.projectId, {
          replicas: spec.max_replicas,
          param: 'autoscaling.maxReplicas',
          replacing: d.container_deployment_id,
        });
      }
      // The workflow refuses (a 409) if it began deleting meanwhile.
      await executeEntityUpdate(
        temporal,
        deploymentWorkflowId(d.container_deployment_id),
        updateDeploymentUpdate,
        [{ min_replicas: spec.min_replicas, max_replicas: spec.max_replicas, autoscaling: spec.autoscaling }],
        idempotencyKey,
      );
    }
  }
  const stopped = (a: EndpointAutoscaling) => Number(a.maxReplicas ?? 1) < 1;
  await withTransaction(db, async (tx) => {
    await updateEndpointDeployment(tx, d.id, { name: change.name, autoscaling });
    if (autoscaling && stopped(autoscaling) !== stopped(d.autoscaling as EndpointAutoscaling)) {
      const pausing = stopped(autoscaling);
      await addEndpointEvent(tx, {
        endpointId: d.endpoint_id,
        deploymentId: d.id,
        sourceKind: 'SOURCE_KIND_DEPLOYMENT',
        level: 'LEVEL_INFO',
        type: pausing ? 'deployment.paused' : 'deployment.resumed',
        message: pausing
          ? `Paused by API key ${principal.apiKeyId}: replicas 0..0; its replicas stop.`
          : `Resumed by API key ${principal.apiKeyId}: replicas ${autoscaling.minReplicas ?? 1}..${autoscaling.maxReplicas}.`,
      });
    }
  });
  return (await getEndpointDeployment(db, d.endpoint_id, d.id))!;
}

/** Deletes a deployment: marked deleting (with its event), then its container deployment told to stop. */
export async function deleteEndpointDeployment(
  deps: ApiDeps,
  principal: Principal,
  d: EndpointDeploymentRow,
): Promise<void> {
  const { db, temporal } = deps;
  if (d.deleting) return; // asked before: it is on its way out
  const rollout = await activeRolloutOf(db, d.id);
  if (rollout)
    throw conflict(
      `Deployment '${d.name}' is part of rollout ${rollout}, which is not finished; complete or cancel it first.`,
      'deployment_in_rollout',
    );
  if (!d.container_deployment_id) {
    await deleteEndpointDeploymentRow(db, d.id);
    return;
  }
  await withTransaction(db, async (tx) => {
    await updateEndpointDeployment(tx, d.id, { deleting: true });
    await addEndpointEvent(tx, {
      endpointId: d.endpoint_id,
      deploymentId: d.id,
      sourceKind: 'SOURCE_KIND_DEPLOYMENT',
      level: 'LEVEL_INFO',
      type: 'deployment.stopping',
      message: `Deletion requested by API key ${principal.apiKeyId}.`,
    });
  });
  await executeEntityUpdate(temporal, deploymentWorkflowId(d.container_deployment_id), deleteDeploymentUpdate, []);
}
