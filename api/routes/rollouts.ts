/**
 * Rollouts (`/v2/projects/{projectId}/endpoints/{endpointId}/rollouts`, the
 * official SDK's `beta.endpoints.rollouts`): create (pending, nothing moves),
 * preview the defaults, start (the workflow `rollout/<id>` begins shifting
 * traffic), pause, resume, promote, cancel, list, get and delete. The
 * workflow's Updates enforce which state allows what; its progress (steps,
 * gates, conditions) is read from its projection. Bodies and queries are strict.
 */
import type { z } from 'zod';
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
  listRollouts,
  markRolloutStarting,
  unmarkRolloutStarting,
  type RolloutRow,
} from '../../db/rollouts';
import {
  cancelRolloutUpdate,
  pauseRolloutUpdate,
  promoteRolloutUpdate,
  resumeRolloutUpdate,
  type CancelDisposition,
  endpointRollout,
} from '../../workflows/rollouts';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CancelRolloutBody,
  CreateRolloutBody,
  type CreateRolloutRequest,
  EndpointOnlyParams,
  EtagBody,
  EtagQuery,
  ListRolloutsQuery,
  PauseRolloutBody,
  RolloutListSchema,
  RolloutParams,
  RolloutPreviewSchema,
  RolloutSchema,
} from '../schemas/endpoints';
import { executeEntityUpdate, startResourceWorkflowOrUndo } from '../workflows';
import { cursorPage, decodeCursor, encodeCursor } from '../cursor-pages';
import { EmptyResponse } from '../schemas/common';

/** Metric rules wait this long beyond their window for the gateway's last writes. */
const INGESTION_LAG_SECONDS = 1;

const replicasOf = (d: EndpointDeploymentRow) => ({
  min: Number(d.autoscaling.minReplicas ?? 1),
  max: Number(d.autoscaling.maxReplicas ?? Math.max(Number(d.autoscaling.minReplicas ?? 1), 1)),
  replicas: d.desired_replicas ?? Number(d.autoscaling.minReplicas ?? 1),
});

export function toRollout(r: RolloutRow) {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : undefined);
  return {
    id: r.id,
    createdAt: iso(r.created_at)!,
    endpointId: r.endpoint_id,
    sourceDeploymentId: r.source_deployment_id,
    targetDeploymentId: r.target_deployment_id,
    strategy: r.strategy,
    state: r.state,
    status: {
      steps: r.status.steps,
      totalSteps: r.spec.steps.length,
      ...(r.status.condition ? { condition: r.status.condition } : {}),
      ...(r.status.updatedAt ? { updatedAt: r.status.updatedAt } : {}),
    },
    ...(r.current_step !== null ? { currentStep: r.current_step } : {}),
    ...(r.current_traffic_percent !== null ? { currentTrafficPercent: r.current_traffic_percent } : {}),
    ...(r.pause_info ? { pauseInfo: r.pause_info } : {}),
    ...(r.started_at ? { startedAt: iso(r.started_at) } : {}),
    ...(r.completed_at ? { completedAt: iso(r.completed_at) } : {}),
    etag: r.etag,
  };
}

export function addRolloutRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal, config } = deps;

  /** The key's project's endpoint (route.ts has checked the path's project is the key's). */
  async function requireEndpoint(principal: Principal, id: string): Promise<EndpointRow> {
    const e = await getEndpoint(db, principal.projectId, id);
    if (!e) throw notFound(`Endpoint '${id}' not found.`);
    return e;
  }
  async function requireRollout(principal: Principal, p: { projectId: string; endpointId: string; id: string }) {
    const e = await requireEndpoint(principal, p.endpointId);
    const r = await getRollout(db, e.id, p.id);
    if (!r) throw notFound(`Endpoint '${e.name}' has no rollout '${p.id}'.`);
    return { e, r };
  }
  const checkEtag = (r: RolloutRow, given: string | undefined) => {
    if (given !== undefined && given !== r.etag)
      throw conflict(
        `The rollout changed since you read it (etag ${given} is stale); read it again and retry.`,
        'etag_mismatch',
      );
  };

  /** Validates a create (or preview) body against the endpoint and fills in every default. */
  async function plan(e: EndpointRow, body: CreateRolloutRequest) {
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

  router.add({
    method: 'post',
    path: '/projects/:projectId/endpoints/:endpointId/rollouts',
    projectScope: 'key',
    operationId: 'createRollout',
    summary: 'Create a rollout (pending: no traffic moves until it is started)',
    tags: ['rollouts'],
    strict: true,
    params: EndpointOnlyParams,
    body: CreateRolloutBody,
    errors: [404, 409],
    response: { status: 200, description: 'The rollout', schema: RolloutSchema },
    handler: async ({ params, body, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const { plan: p } = await plan(e, body);
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
      return toRollout((await getRollout(db, e.id, id))!);
    },
  });

  router.add({
    method: 'post',
    path: '/projects/:projectId/endpoints/:endpointId/rollouts/preview-defaults',
    projectScope: 'key',
    operationId: 'previewRolloutDefaults',
    summary: 'The values a create would pick for unset fields, and the capacity they come from (creates nothing)',
    tags: ['rollouts'],
    strict: true,
    params: EndpointOnlyParams,
    body: CreateRolloutBody,
    errors: [404],
    response: { status: 200, description: 'The preview', schema: RolloutPreviewSchema },
    handler: async ({ params, body, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const { plan: p, sourceNow, targetNow } = await plan(e, body);
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
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:endpointId/rollouts',
    projectScope: 'key',
    operationId: 'listRollouts',
    summary: "An endpoint's rollouts, newest first (filter: active or terminal)",
    tags: ['rollouts'],
    strict: true,
    params: EndpointOnlyParams,
    query: ListRolloutsQuery,
    errors: [404],
    response: { status: 200, description: 'Rollouts', schema: RolloutListSchema },
    handler: async ({ params, query, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const rows = await listRollouts(db, e.id, {
        filter: query.filter,
        after: decodeCursor(query.after),
        limit: query.limit + 1,
      });
      return cursorPage(rows, query.limit, encodeCursor, toRollout);
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:endpointId/rollouts/:id',
    projectScope: 'key',
    operationId: 'getRollout',
    summary: "A rollout's strategy, state, traffic, step history and gate results",
    tags: ['rollouts'],
    strict: true,
    params: RolloutParams,
    errors: [404],
    response: { status: 200, description: 'The rollout', schema: RolloutSchema },
    handler: async ({ params, principal }) => toRollout((await requireRollout(principal, params)).r),
  });

  router.add({
    method: 'post',
    path: '/projects/:projectId/endpoints/:endpointId/rollouts/:id/start',
    projectScope: 'key',
    operationId: 'startRollout',
    summary: 'Start a pending rollout: its workflow rollout/<id> begins shifting traffic',
    tags: ['rollouts'],
    strict: true,
    params: RolloutParams,
    errors: [404, 409],
    response: { status: 200, description: 'The rollout', schema: RolloutSchema },
    handler: async ({ params, principal }) => {
      const { e, r } = await requireRollout(principal, params);
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
      return toRollout((await getRollout(db, e.id, r.id))!);
    },
  });

  /** pause / resume / promote / cancel: an Update of the rollout's workflow, then its projection. */
  const command = (
    name: 'pause' | 'resume' | 'promote' | 'cancel',
    summary: string,
    body: z.ZodObject,
    /** Sends the rollout's workflow its typed Update, built from the request body (`gone`: the answer without a workflow). */
    send: (
      workflowId: string,
      given: Record<string, unknown>,
      idempotencyKey: string | undefined,
      gone: Error,
    ) => Promise<void>,
  ) =>
    router.add({
      method: 'post',
      path: `/projects/:projectId/endpoints/:endpointId/rollouts/:id/${name}`,
      projectScope: 'key',
      operationId: `${name}Rollout`,
      summary,
      tags: ['rollouts'],
      strict: true,
      params: RolloutParams,
      body,
      errors: [404, 409],
      idempotencyKey: true,
      response: { status: 200, description: 'The rollout', schema: RolloutSchema },
      handler: async ({ params, body: b, principal, idempotencyKey }) => {
        const { e, r } = await requireRollout(principal, params);
        const given = b as Record<string, unknown>;
        checkEtag(r, given.etag as string | undefined);
        // Whether its state allows the command is the workflow's validator's to say (409 rollout_state);
        // a rollout with no workflow (pending, or ended) gets the same answer from its stored state.
        const gone = conflict(`Cannot ${name} a rollout that is ${r.state}.`, 'rollout_state');
        await send(rolloutWorkflowId(r.id), given, idempotencyKey, gone);
        return toRollout((await getRollout(db, e.id, r.id))!);
      },
    });
  command(
    'pause',
    'Ask a running rollout to pause (answers PAUSING; it parks as PAUSED)',
    PauseRolloutBody,
    (id, b, key, gone) =>
      executeEntityUpdate(temporal, id, pauseRolloutUpdate, [{ reason: b.reason as string | undefined }], key, gone),
  );
  command(
    'resume',
    'Resume a paused or system-paused rollout from its current step and split',
    EtagBody,
    (id, _b, key, gone) => executeEntityUpdate(temporal, id, resumeRolloutUpdate, [], key, gone),
  );
  command(
    'promote',
    'Complete a running or paused rollout now: all traffic to the target',
    EtagBody,
    (id, _b, key, gone) => executeEntityUpdate(temporal, id, promoteRolloutUpdate, [], key, gone),
  );
  command(
    'cancel',
    "Cancel a rollout: the split frozen as it stands (FREEZE, the default), or all of the pair's traffic back on the source (REVERT)",
    CancelRolloutBody,
    (id, b, key, gone) =>
      executeEntityUpdate(
        temporal,
        id,
        cancelRolloutUpdate,
        [{ reason: b.reason as string, ...(b.disposition ? { disposition: b.disposition as CancelDisposition } : {}) }],
        key,
        gone,
      ),
  );

  router.add({
    method: 'delete',
    path: '/projects/:projectId/endpoints/:endpointId/rollouts/:id',
    projectScope: 'key',
    operationId: 'deleteRollout',
    summary: 'Delete a rollout record (pending or finished; a running one must be canceled or completed first)',
    tags: ['rollouts'],
    strict: true,
    params: RolloutParams,
    query: EtagQuery,
    errors: [404, 409],
    response: { status: 200, description: 'Deleted', schema: EmptyResponse },
    handler: async ({ params, query, principal }) => {
      const { r } = await requireRollout(principal, params);
      checkEtag(r, query.etag);
      if (!(await deleteRolloutRow(db, r.id)))
        throw conflict(
          `Rollout ${r.id} is ${r.state}; cancel it or let it complete before deleting it.`,
          'rollout_active',
        );
      return {};
    },
  });
}
