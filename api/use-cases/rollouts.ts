/**
 * The write paths of rollouts: planning a create (or its preview) against the endpoint's
 * deployments, creating one (pending: a row and an endpoint event), starting one (its workflow
 * `rollout/<id>`; the row goes back to pending if the workflow cannot start), the pause / resume
 * / promote / cancel Updates of that workflow, and deleting a record; and the lookups the rollout
 * routes share.
 */
import type { Principal } from '../../db/accounts';
import {
  addEndpointEvent,
  getEndpoint,
  getEndpointDeployment,
  type EndpointDeploymentRow,
  type EndpointRow,
} from '../../db/endpoints';
import {
  deleteRolloutRow,
  getRollout,
  insertRollout,
  markRolloutStarting,
  unmarkRolloutStarting,
  type RolloutRow,
} from '../../db/rollouts';
import { newId } from '../../platform/ids';
import {
  checkCanarySteps,
  checkMetricRule,
  DEFAULT_STEP_INTERVAL_SECONDS,
  durationSeconds,
  planSteps,
  rolloutWorkflowId,
  strategyOf,
  TARGET_READY_TIMEOUT_SECONDS,
  type MetricRule,
  type RolloutPlan,
  type RolloutWorkflowInput,
} from '../../shared/rollouts';
import type { Client } from '@temporalio/client';
import {
  cancelRolloutUpdate,
  endpointRollout,
  pauseRolloutUpdate,
  promoteRolloutUpdate,
  resumeRolloutUpdate,
  type CancelDisposition,
} from '../../workflows/rollouts';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type { CreateRolloutRequest } from '../schemas/endpoints';
import { executeEntityUpdate, startResourceWorkflowOrUndo } from '../workflows';

/** Metric rules wait this long beyond their window for the gateway's last writes. */
const INGESTION_LAG_SECONDS = 1;

const replicasOf = (d: EndpointDeploymentRow) => ({
  min: Number(d.autoscaling.minReplicas ?? 1),
  max: Number(d.autoscaling.maxReplicas ?? Math.max(Number(d.autoscaling.minReplicas ?? 1), 1)),
  replicas: d.desired_replicas ?? Number(d.autoscaling.minReplicas ?? 1),
});

/** The key's project's endpoint (route.ts has checked the path's project is the key's). */
export async function requireEndpoint(
  deps: Pick<ApiDeps, 'db'>,
  principal: Principal,
  id: string,
): Promise<EndpointRow> {
  const e = await getEndpoint(deps.db, principal.projectId, id);
  if (!e) throw notFound(`Endpoint '${id}' not found.`);
  return e;
}

/** The endpoint's rollout, or a 404 naming it. */
export async function requireRollout(
  deps: Pick<ApiDeps, 'db'>,
  principal: Principal,
  p: { endpointId: string; id: string },
) {
  const e = await requireEndpoint(deps, principal, p.endpointId);
  const r = await getRollout(deps.db, e.id, p.id);
  if (!r) throw notFound(`Endpoint '${e.name}' has no rollout '${p.id}'.`);
  return { e, r };
}

/** A 409 when the caller's etag is stale (no etag: no check). */
export function checkEtag(r: RolloutRow, given: string | undefined) {
  if (given !== undefined && given !== r.etag)
    throw conflict(
      `The rollout changed since you read it (etag ${given} is stale); read it again and retry.`,
      'etag_mismatch',
    );
}

/** Validates a create (or preview) body against the endpoint and fills in every default. */
async function plan(deps: Pick<ApiDeps, 'db' | 'config'>, e: EndpointRow, body: CreateRolloutRequest) {
  const { db, config } = deps;
  const deployment = async (id: string, field: string) => {
    const d = await getEndpointDeployment(db, e.id, id);
    if (!d) throw badRequest(`Endpoint '${e.name}' has no deployment '${id}'.`, field);
    if (d.failure || d.deleting)
      throw badRequest(
        `Deployment '${d.name}' cannot take part in a rollout: ${d.failure ?? 'it is being deleted'}.`,
        field,
      );
    return d;
  };
  const source = await deployment(body.sourceDeploymentId, 'sourceDeploymentId');
  const target = await deployment(body.targetDeploymentId, 'targetDeploymentId');
  if (source.id === target.id)
    throw badRequest('The source and target must be different deployments.', 'targetDeploymentId');
  const strategy = strategyOf(body);
  if (!strategy) throw badRequest('Give one strategy: canary, rolling or blueGreen.', 'canary');
  if (body.metrics?.length && strategy !== 'ROLLOUT_STRATEGY_TYPE_CANARY')
    throw badRequest('Metric gates are for canary rollouts only.', 'metrics');
  const canarySteps = body.canary?.steps;
  if (canarySteps?.length) {
    const wrong = checkCanarySteps(canarySteps);
    if (wrong) throw badRequest(`${wrong[1]}.`, wrong[0]);
  }
  let interval =
    strategy === 'ROLLOUT_STRATEGY_TYPE_CANARY' ? DEFAULT_STEP_INTERVAL_SECONDS : config.rolloutBatchSoakSeconds;
  if (body.canary?.stepInterval !== undefined) {
    const s = durationSeconds(body.canary.stepInterval);
    if (s === null || s <= 0 || s > 86_400)
      throw badRequest('stepInterval is a positive duration such as "300s", at most a day.', 'canary.stepInterval');
    interval = s;
  }
  const metrics: MetricRule[] = [];
  for (const [i, m] of (body.metrics ?? []).entries()) {
    const rule = { ...m, stat: m.stat ?? ('METRIC_STAT_TYPE_AVG' as const) };
    if (m.name === 'router_latency' && !m.stat)
      throw badRequest(
        'router_latency needs stat METRIC_STAT_TYPE_AVG or METRIC_STAT_TYPE_PERCENTILE.',
        `metrics[${i}].stat`,
      );
    const wrong = checkMetricRule(rule);
    if (wrong) throw badRequest(`${wrong[1]}.`, `metrics[${i}]${wrong[0] ? `.${wrong[0]}` : ''}`);
    let windowSeconds = interval;
    if (m.window !== undefined) {
      const w = durationSeconds(m.window);
      if (w === null || w <= 0 || w > 86_400)
        throw badRequest('window is a positive duration such as "300s".', `metrics[${i}].window`);
      windowSeconds = w;
    }
    metrics.push({ ...rule, windowSeconds });
  }
  // The soak grows to cover every rule's window plus the gateway's write lag.
  const stepIntervalSeconds = Math.max(interval, ...metrics.map((m) => m.windowSeconds + INGESTION_LAG_SECONDS));
  const sourceNow = replicasOf(source);
  const targetNow = replicasOf(target);
  const finalTargetReplicas = body.finalTargetReplicas ?? Math.max(1, sourceNow.replicas);
  const result: RolloutPlan = {
    strategy,
    steps: planSteps(strategy, canarySteps, finalTargetReplicas),
    stepIntervalSeconds,
    metrics,
    finalSourceReplicas: body.finalSourceReplicas ?? 0,
    finalTargetReplicas,
  };
  return { source, target, sourceNow, targetNow, plan: result };
}

/** Creates a pending rollout on the key's endpoint (nothing moves until it is started); its row. */
export async function createRollout(
  deps: Pick<ApiDeps, 'db' | 'config'>,
  principal: Principal,
  endpointId: string,
  body: CreateRolloutRequest,
): Promise<RolloutRow> {
  const { db } = deps;
  const e = await requireEndpoint(deps, principal, endpointId);
  const { plan: p } = await plan(deps, e, body);
  const id = newId('rol', '_');
  if (
    !(await insertRollout(db, {
      id,
      endpointId: e.id,
      projectId: principal.projectId,
      sourceId: body.sourceDeploymentId,
      targetId: body.targetDeploymentId,
      spec: { ...p, request: body },
    }))
  )
    throw conflict(
      `Endpoint '${e.name}' already has a rollout that is not finished; finish, cancel or delete it first.`,
      'rollout_active',
    );
  await addEndpointEvent(db, {
    endpointId: e.id,
    sourceKind: 'SOURCE_KIND_ENDPOINT',
    subjectId: id,
    level: 'LEVEL_INFO',
    type: 'rollout.created',
    message: `Rollout ${id} created by API key ${principal.apiKeyId}: ${p.strategy}, ${p.steps.map((s) => `${s.traffic}%`).join(' -> ')}.`,
  });
  return (await getRollout(db, e.id, id))!;
}

/** The values a create would pick for unset fields, and the capacity they come from (creates nothing). */
export async function previewRolloutDefaults(
  deps: Pick<ApiDeps, 'db' | 'config'>,
  principal: Principal,
  endpointId: string,
  body: CreateRolloutRequest,
) {
  const { db } = deps;
  const e = await requireEndpoint(deps, principal, endpointId);
  const { plan: p, sourceNow, targetNow } = await plan(deps, e, body);
  const warnings: Array<{ code: string; message: string }> = [];
  if (p.finalTargetReplicas > targetNow.max)
    warnings.push({
      code: 'ROLLOUT_WILL_RAISE_TARGET_MAX',
      message: `The target's maximum replicas rise from ${targetNow.max} to ${p.finalTargetReplicas}.`,
    });
  if (targetNow.min > p.finalTargetReplicas)
    warnings.push({
      code: 'FINAL_BELOW_INHERITED_MIN',
      message: `The target keeps its own minimum of ${targetNow.min} replicas, above the final ${p.finalTargetReplicas}.`,
    });
  if (sourceNow.min > p.finalTargetReplicas)
    warnings.push({
      code: 'FINAL_BELOW_SOURCE_MIN',
      message: `The source's minimum is ${sourceNow.min} replicas; the target lands at ${p.finalTargetReplicas}.`,
    });
  const canary = p.strategy === 'ROLLOUT_STRATEGY_TYPE_CANARY';
  return {
    sourceReplicas: sourceNow.replicas,
    targetReplicas: replicasOf((await getEndpointDeployment(db, e.id, body.targetDeploymentId))!).replicas,
    targetMinReplicas: targetNow.min,
    targetMaxReplicas: targetNow.max,
    warnings,
    spec: {
      sourceDeploymentId: body.sourceDeploymentId,
      targetDeploymentId: body.targetDeploymentId,
      ...(canary ? { canary: { stepInterval: `${p.stepIntervalSeconds}s`, steps: p.steps } } : {}),
      ...(p.strategy === 'ROLLOUT_STRATEGY_TYPE_ROLLING' ? { rolling: {} } : {}),
      ...(p.strategy === 'ROLLOUT_STRATEGY_TYPE_BLUE_GREEN' ? { blueGreen: {} } : {}),
      metrics: p.metrics.map(({ windowSeconds, ...m }) => ({ ...m, window: `${windowSeconds}s` })),
      finalSourceReplicas: p.finalSourceReplicas,
      finalTargetReplicas: p.finalTargetReplicas,
    },
    estimatedEffectiveSteps: body.canary?.steps?.length ? [] : p.steps,
    frozenPair: false,
  };
}

/** Starts a pending rollout: its workflow `rollout/<id>` begins shifting traffic; its row. */
export async function startRollout(
  deps: Pick<ApiDeps, 'db' | 'temporal'>,
  principal: Principal,
  p: { endpointId: string; id: string },
): Promise<RolloutRow> {
  const { db, temporal } = deps;
  const { e, r } = await requireRollout(deps, principal, p);
  if (r.state !== 'ROLLOUT_STATE_PENDING')
    throw conflict(`Rollout ${r.id} is ${r.state}; only a pending rollout starts.`, 'rollout_not_pending');
  const source = await getEndpointDeployment(db, e.id, r.source_deployment_id);
  const target = await getEndpointDeployment(db, e.id, r.target_deployment_id);
  if (!source || !target || target.failure || target.deleting)
    throw conflict(
      'The source or target deployment is gone or cannot serve; delete this rollout and create another.',
      'rollout_deployment_gone',
    );
  if (!(await markRolloutStarting(db, r.id)))
    throw conflict(`Rollout ${r.id} was started already.`, 'rollout_not_pending');
  const { request: _request, ...plan } = r.spec;
  const input: RolloutWorkflowInput = {
    rolloutId: r.id,
    endpointId: e.id,
    sourceDeploymentId: source.id,
    targetDeploymentId: target.id,
    sourceContainerId: source.container_deployment_id,
    targetContainerId: target.container_deployment_id,
    source: replicasOf(source),
    target: replicasOf(target),
    plan,
    targetReadyTimeoutSeconds: TARGET_READY_TIMEOUT_SECONDS,
  };
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: endpointRollout,
      workflowId: rolloutWorkflowId(r.id),
      args: [input],
      projectId: principal.projectId,
      resourceType: 'rollout',
      resourceId: r.id,
      status: 'ROLLOUT_STATE_RUNNING',
      names: { projectSlug: principal.projectSlug, resource: e.name },
      summary: `Rollout on ${e.name}: ${source.name} -> ${target.name} (${plan.strategy})`,
      details: `Started by API key \`${principal.apiKeyId}\`. Steps: ${plan.steps.map((s) => `${s.traffic}%`).join(' -> ')}, soak ${plan.stepIntervalSeconds}s.`,
    },
    () => unmarkRolloutStarting(db, r.id),
  );
  return (await getRollout(db, e.id, r.id))!;
}

/**
 * pause / resume / promote / cancel: checks the etag and that the rollout is started and not
 * finished, sends its workflow the Update `send` builds, then reads its projection.
 */
/** An operator's command to a running rollout, as its route parsed it. */
export type RolloutCommand =
  | { name: 'pause'; reason?: string }
  | { name: 'resume' }
  | { name: 'promote' }
  | { name: 'cancel'; reason: string; disposition?: CancelDisposition };

/** Sends a rollout's workflow the command's typed Update (the caller's Idempotency-Key as its id). */
function sendCommand(temporal: Client, workflowId: string, c: RolloutCommand, key: string | undefined, gone: Error) {
  switch (c.name) {
    case 'pause':
      return executeEntityUpdate(temporal, workflowId, pauseRolloutUpdate, [{ reason: c.reason }], key, gone);
    case 'resume':
      return executeEntityUpdate(temporal, workflowId, resumeRolloutUpdate, [], key, gone);
    case 'promote':
      return executeEntityUpdate(temporal, workflowId, promoteRolloutUpdate, [], key, gone);
    case 'cancel': {
      const args = { reason: c.reason, ...(c.disposition ? { disposition: c.disposition } : {}) };
      return executeEntityUpdate(temporal, workflowId, cancelRolloutUpdate, [args], key, gone);
    }
  }
}

/** pause / resume / promote / cancel: an Update of the rollout's workflow, then its projection. */
export async function commandRollout(
  deps: Pick<ApiDeps, 'db' | 'temporal'>,
  principal: Principal,
  p: { endpointId: string; id: string },
  command: RolloutCommand,
  etag: string | undefined,
  idempotencyKey: string | undefined,
): Promise<RolloutRow> {
  const { e, r } = await requireRollout(deps, principal, p);
  checkEtag(r, etag);
  // Whether its state allows the command is the workflow's validator's to say (409 rollout_state);
  // a rollout with no workflow (pending, or ended) gets the same answer from its stored state.
  const gone = conflict(`Cannot ${command.name} a rollout that is ${r.state}.`, 'rollout_state');
  await sendCommand(deps.temporal, rolloutWorkflowId(r.id), command, idempotencyKey, gone);
  return (await getRollout(deps.db, e.id, r.id))!;
}

/** Deletes a pending or finished rollout's record (a running one must end first). */
export async function deleteRollout(
  deps: Pick<ApiDeps, 'db'>,
  principal: Principal,
  p: { endpointId: string; id: string },
  etag: string | undefined,
): Promise<void> {
  const { r } = await requireRollout(deps, principal, p);
  checkEtag(r, etag);
  if (!(await deleteRolloutRow(deps.db, r.id)))
    throw conflict(`Rollout ${r.id} is ${r.state}; cancel it or let it complete before deleting it.`, 'rollout_active');
}
