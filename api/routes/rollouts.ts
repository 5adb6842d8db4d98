/**
 * Rollouts (`/v2/projects/{projectId}/endpoints/{endpointId}/rollouts`, the
 * official SDK's `beta.endpoints.rollouts`): create (pending, nothing moves),
 * preview the defaults, start (the workflow `rollout/<id>` begins shifting
 * traffic), pause, resume, promote, cancel, list, get and delete. The
 * workflow's Updates enforce which state allows what; its progress (steps,
 * gates, conditions) is read from its projection. Bodies and queries are strict.
 */
import type { z } from 'zod';
import { listRollouts } from '../../db/rollouts';
import type { ApiDeps } from '../deps';
import type { ApiRouter } from '../route';
import {
  CancelRolloutBody,
  CreateRolloutBody,
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
import { cursorPage, decodeCursor, encodeCursor } from '../cursor-pages';
import { EmptyResponse } from '../schemas/common';
import {
  commandRollout,
  createRollout,
  deleteRollout,
  previewRolloutDefaults,
  requireEndpoint,
  requireRollout,
  startRollout,
  type RolloutCommand,
} from '../use-cases/rollouts';
import { toRollout } from '../presenters/rollouts';

export function addRolloutRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

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
    handler: async ({ params, body, principal }) =>
      toRollout(await createRollout(deps, principal, params.endpointId, body)),
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
    handler: ({ params, body, principal }) => previewRolloutDefaults(deps, principal, params.endpointId, body),
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
      const e = await requireEndpoint(deps, principal, params.endpointId);
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
    handler: async ({ params, principal }) => toRollout((await requireRollout(deps, principal, params)).r),
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
    handler: async ({ params, principal }) => toRollout(await startRollout(deps, principal, params)),
  });

  /** pause / resume / promote / cancel: the use case sends the rollout's workflow its Update. */
  const command = <B extends { etag?: string }>(
    name: RolloutCommand['name'],
    summary: string,
    body: z.ZodType<B>,
    /** The command the request body says. */
    parse: (b: B) => RolloutCommand,
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
      handler: async ({ params, body: b, principal, idempotencyKey }) =>
        toRollout(await commandRollout(deps, principal, params, parse(b), b.etag, idempotencyKey)),
    });
  command('pause', 'Ask a running rollout to pause (answers PAUSING; it parks as PAUSED)', PauseRolloutBody, (b) => ({
    name: 'pause',
    reason: b.reason,
  }));
  command('resume', 'Resume a paused or system-paused rollout from its current step and split', EtagBody, () => ({
    name: 'resume',
  }));
  command('promote', 'Complete a running or paused rollout now: all traffic to the target', EtagBody, () => ({
    name: 'promote',
  }));
  command(
    'cancel',
    "Cancel a rollout: the split frozen as it stands (FREEZE, the default), or all of the pair's traffic back on the source (REVERT)",
    CancelRolloutBody,
    (b) => ({ name: 'cancel', reason: b.reason, ...(b.disposition ? { disposition: b.disposition } : {}) }),
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
      await deleteRollout(deps, principal, params, query.etag);
      return {};
    },
  });
}
