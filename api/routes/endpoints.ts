/**
 * Dedicated endpoints (`/v2/projects/{projectId}/endpoints`, the official SDK's
 * `beta.endpoints`): endpoints, their deployments and events. An endpoint is
 * called at the inference gateway as `<project_slug>/<endpoint name>`. Each
 * endpoint deployment is served by a container deployment running the model
 * server (its entity workflow `deployment/<id>` provisions, replaces,
 * autoscales and scales its replicas to zero); its state here is read from
 * that deployment. Bodies and query strings are strict. The retired v1 create
 * answers 403.
 */
import type { Principal } from '../../db/accounts';
import {
  deleteEndpointRow,
  getEndpoint,
  getEndpointDeployment,
  listEndpointDeployments,
  listEndpointEvents,
  listEndpoints,
  type EndpointRow,
} from '../../db/endpoints';
import type { ApiDeps } from '../deps';
import { trafficShares } from '../../shared/endpoint-state';
import { filteredPage } from '../list-filter';
import { badRequest, conflict, forbidden, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CreateEndpointBody,
  CreateEndpointDeploymentBody,
  DeploymentParams,
  EndpointDeploymentListSchema,
  EndpointDeploymentSchema,
  EndpointEventListSchema,
  EndpointListSchema,
  EndpointOnlyParams,
  EndpointParams,
  EndpointSchema,
  EtagQuery,
  EVENT_LEVELS,
  FilteredPageQuery,
  ListEndpointEventsQuery,
  UpdateEndpointBody,
  UpdateEndpointDeploymentBody,
  UpdateMaskQuery,
  ValidateOnlyQuery,
} from '../schemas/endpoints';
import {
  changeEndpoint,
  changeEndpointDeployment,
  createEndpoint,
  createEndpointDeployment,
  deleteEndpointDeployment,
  planEndpointDeployment,
} from '../use-cases/endpoints';
import { EmptyResponse, ProjectParams } from '../schemas/common';
import { toDeployment, toEndpoint, toEndpointEvent, validatedDeployment } from '../presenters/endpoints';

/** Most endpoints a project's list reads (filtered, ordered and paged in memory). */
const MAX_LISTED = 10_000;

/**
 * The fields of an update body that `updateMask` selects (comma-separated field paths; a sub-path such as
 * `autoscaling.maxReplicas` selects its top field); without a mask, every field sent. `etag` always stays.
 */
function masked<B extends Record<string, unknown>>(body: B, updateMask: string | undefined, updatable: string[]): B {
  if (updateMask === undefined) return body;
  const selected = new Set<string>();
  for (const path of updateMask
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean)) {
    const field = path.split('.')[0];
    if (!updatable.includes(field))
      throw badRequest(`updateMask names '${path}', which is not one of ${updatable.join(', ')}.`, 'updateMask');
    selected.add(field);
  }
  return Object.fromEntries(Object.entries(body).filter(([k]) => k === 'etag' || selected.has(k))) as B;
}
/** Events read from the database at a time while filling a page of the events listing. */
const EVENT_BATCH = 500;

export function addEndpointRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  /** The key's project's endpoint (route.ts has checked the path's project is the key's). */
  async function requireEndpoint(principal: Principal, id: string) {
    const e = await getEndpoint(db, principal.projectId, id);
    if (!e) throw notFound(`Endpoint '${id}' not found.`);
    return e;
  }
  async function requireDeployment(e: EndpointRow, id: string) {
    const d = await getEndpointDeployment(db, e.id, id);
    if (!d) throw notFound(`Endpoint '${e.name}' has no deployment '${id}'.`);
    return d;
  }
  const checkEtag = (current: string, given: string | undefined, what: string) => {
    if (given !== undefined && given !== current)
      throw conflict(
        `The ${what} changed since you read it (etag ${given} is stale); read it again and retry.`,
        'etag_mismatch',
      );
  };

  // ---- endpoints ----
  router.add({
    method: 'post',
    path: '/projects/:projectId/endpoints',
    projectScope: 'key',
    operationId: 'createEndpoint',
    summary: 'Create a dedicated endpoint (called as <project_slug>/<name> at the inference gateway)',
    tags: ['endpoints'],
    strict: true,
    params: ProjectParams,
    body: CreateEndpointBody,
    errors: [404, 409],
    response: { status: 200, description: 'The endpoint', schema: EndpointSchema },
    handler: async ({ body, principal }) => toEndpoint(await createEndpoint(db, principal, body), []),
  });
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints',
    projectScope: 'key',
    operationId: 'listEndpoints',
    summary: "The project's endpoints, newest first, by cursor",
    tags: ['endpoints'],
    strict: true,
    params: ProjectParams,
    query: FilteredPageQuery,
    errors: [404],
    response: { status: 200, description: 'Endpoints', schema: EndpointListSchema },
    handler: async ({ params, query, principal }) => {
      const all = await listEndpoints(db, principal.projectId, undefined, MAX_LISTED);
      const { page, next } = filteredPage(all, query, principal.projectSlug);
      return {
        object: 'list' as const,
        data: await Promise.all(page.map(async (e) => toEndpoint(e, await listEndpointDeployments(db, e.id)))),
        next_cursor: next,
      };
    },
  });
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:id',
    projectScope: 'key',
    operationId: 'getEndpoint',
    summary: 'An endpoint, by id or name, with its deployments and traffic split',
    tags: ['endpoints'],
    strict: true,
    params: EndpointParams,
    errors: [404],
    response: { status: 200, description: 'The endpoint', schema: EndpointSchema },
    handler: async ({ params, principal }) => {
      const e = await requireEndpoint(principal, params.id);
      return toEndpoint(e, await listEndpointDeployments(db, e.id));
    },
  });
  router.add({
    method: 'patch',
    path: '/projects/:projectId/endpoints/:id',
    projectScope: 'key',
    operationId: 'updateEndpoint',
    summary: 'Rename an endpoint, change its visibility or its traffic split (etag: optimistic concurrency)',
    tags: ['endpoints'],
    strict: true,
    params: EndpointParams,
    query: UpdateMaskQuery,
    body: UpdateEndpointBody,
    errors: [404, 409],
    response: { status: 200, description: 'The endpoint', schema: EndpointSchema },
    handler: async ({ params, query, body: sent, principal }) => {
      const body = masked(sent, query.updateMask, ['name', 'visibility', 'trafficSplit']);
      const e = await requireEndpoint(principal, params.id);
      checkEtag(e.etag, body.etag, 'endpoint');
      const deployments = await listEndpointDeployments(db, e.id);
      return toEndpoint(await changeEndpoint(db, principal, e, deployments, body), deployments);
    },
  });
  router.add({
    method: 'delete',
    path: '/projects/:projectId/endpoints/:id',
    projectScope: 'key',
    operationId: 'deleteEndpoint',
    summary: 'Delete an endpoint that has no deployments left (other than ones being deleted)',
    tags: ['endpoints'],
    strict: true,
    params: EndpointParams,
    query: EtagQuery,
    errors: [404, 409],
    response: { status: 200, description: 'Deleted', schema: EmptyResponse },
    handler: async ({ params, query, principal }) => {
      const e = await requireEndpoint(principal, params.id);
      checkEtag(e.etag, query.etag, 'endpoint');
      // Deployments already being deleted do not hold the endpoint: their container deployments
      // finish stopping on their own, whether or not the endpoint is still there.
      const remaining = (await listEndpointDeployments(db, e.id)).filter((d) => !d.deleting);
      if (remaining.length)
        throw conflict(
          `Endpoint '${e.name}' still has ${remaining.length} deployment(s); delete them first.`,
          'endpoint_in_use',
        );
      await deleteEndpointRow(db, e.id);
      return {};
    },
  });

  // ---- deployments ----
  router.add({
    method: 'post',
    path: '/projects/:projectId/endpoints/:endpointId/deployments',
    projectScope: 'key',
    operationId: 'createEndpointDeployment',
    summary: 'Deploy a model behind an endpoint (a registered model id, or a supported base model)',
    tags: ['endpoints'],
    strict: true,
    params: EndpointOnlyParams,
    query: ValidateOnlyQuery,
    body: CreateEndpointDeploymentBody,
    errors: [403, 404, 409],
    response: { status: 200, description: 'The deployment', schema: EndpointDeploymentSchema },
    handler: async ({ params, query, body, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const planned = await planEndpointDeployment(db, principal, e, body);
      if (body.validateOnly ?? query.validateOnly === 'true') return validatedDeployment(principal, planned);
      return toDeployment(await createEndpointDeployment(deps, principal, planned));
    },
  });
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:endpointId/deployments',
    projectScope: 'key',
    operationId: 'listEndpointDeployments',
    summary: "An endpoint's deployments",
    tags: ['endpoints'],
    strict: true,
    params: EndpointOnlyParams,
    query: FilteredPageQuery,
    errors: [404],
    response: { status: 200, description: 'Deployments', schema: EndpointDeploymentListSchema },
    handler: async ({ params, query, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const deployments = await listEndpointDeployments(db, e.id);
      const shares = trafficShares(e, deployments);
      const { page, next } = filteredPage(deployments, query, principal.projectSlug);
      return {
        object: 'list' as const,
        data: page.map((d) => toDeployment(d, shares.get(d.id) ?? 0)),
        next_cursor: next,
      };
    },
  });
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:id',
    projectScope: 'key',
    operationId: 'getEndpointDeployment',
    summary: 'A deployment of an endpoint: state, replicas, model and revision',
    tags: ['endpoints'],
    strict: true,
    params: DeploymentParams,
    errors: [404],
    response: { status: 200, description: 'The deployment', schema: EndpointDeploymentSchema },
    handler: async ({ params, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const d = await requireDeployment(e, params.id);
      const shares = trafficShares(e, await listEndpointDeployments(db, e.id));
      return toDeployment(d, shares.get(d.id) ?? 0);
    },
  });
  router.add({
    method: 'patch',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:id',
    projectScope: 'key',
    operationId: 'updateEndpointDeployment',
    summary: "Change a deployment's autoscaling or name (etag: optimistic concurrency)",
    tags: ['endpoints'],
    strict: true,
    params: DeploymentParams,
    query: UpdateMaskQuery,
    body: UpdateEndpointDeploymentBody,
    errors: [403, 404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The deployment', schema: EndpointDeploymentSchema },
    handler: async ({ params, query, body: sent, principal, idempotencyKey }) => {
      const body = masked(sent, query.updateMask, ['name', 'autoscaling']);
      const e = await requireEndpoint(principal, params.endpointId);
      const d = await requireDeployment(e, params.id);
      checkEtag(d.etag, body.etag, 'deployment');
      return toDeployment(await changeEndpointDeployment(deps, principal, d, body, idempotencyKey));
    },
  });
  router.add({
    method: 'delete',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:id',
    projectScope: 'key',
    operationId: 'deleteEndpointDeployment',
    summary: 'Delete a deployment: its replicas stop (with their grace period), then it is gone',
    tags: ['endpoints'],
    strict: true,
    params: DeploymentParams,
    query: EtagQuery,
    errors: [404, 409],
    response: { status: 200, description: 'Deletion accepted', schema: EmptyResponse },
    handler: async ({ params, query, principal }) => {
      const e = await requireEndpoint(principal, params.endpointId);
      const d = await requireDeployment(e, params.id);
      checkEtag(d.etag, query.etag, 'deployment');
      await deleteEndpointDeployment(deps, principal, d);
      return {};
    },
  });

  // ---- events ----
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:id/events',
    projectScope: 'key',
    operationId: 'listEndpointEvents',
    summary: "An endpoint's events, across all its deployments, newest first",
    tags: ['endpoints'],
    strict: true,
    params: EndpointParams,
    query: ListEndpointEventsQuery,
    errors: [404],
    response: { status: 200, description: 'Events', schema: EndpointEventListSchema },
    handler: async ({ params, query, principal }) => {
      const e = await requireEndpoint(principal, params.id);
      // The SDK sends arrays comma-separated (`types=a,b`); repeated keys arrive as arrays.
      const arr = (v: string | string[] | undefined) =>
        v === undefined ? undefined : (Array.isArray(v) ? v : [v]).flatMap((x) => x.split(','));
      const sourceKinds = arr(query.sourceKinds);
      const minLevel = EVENT_LEVELS.indexOf(query.minLevel ?? 'LEVEL_DEBUG');
      const since = query.since ? Date.parse(query.since) : -Infinity;
      const until = query.until ? Date.parse(query.until) : Infinity;
      const wanted = (r: { level: string; source_kind: string; created_at: Date }) => {
        const at = new Date(r.created_at).getTime();
        return (
          EVENT_LEVELS.indexOf(r.level as (typeof EVENT_LEVELS)[number]) >= minLevel &&
          (!sourceKinds || sourceKinds.includes(r.source_kind)) &&
          at >= since &&
          at <= until
        );
      };
      // Read in batches until a page (and one more, to know whether more remain) has passed the filters.
      const filtered = Boolean(sourceKinds || query.minLevel || query.since || query.until);
      const batchSize = filtered ? EVENT_BATCH : query.limit + 1;
      const rows: Awaited<ReturnType<typeof listEndpointEvents>> = [];
      let beforeId = query.after === undefined ? undefined : Number(query.after);
      for (;;) {
        const batch = await listEndpointEvents(db, e.id, {
          beforeId,
          limit: batchSize,
          deploymentIds: arr(query.deploymentIds),
          types: arr(query.types),
          subjectId: query.subjectId,
        });
        rows.push(...batch.filter(wanted));
        if (rows.length > query.limit || batch.length < batchSize) break;
        beforeId = Number(batch[batch.length - 1].id);
      }
      const page = rows.slice(0, query.limit);
      return {
        object: 'list' as const,
        data: page.map(toEndpointEvent),
        next_cursor: rows.length > query.limit ? page[page.length - 1].id : null,
      };
    },
  });
}

/** The retired v1 create: endpoints are made through the v2 API now. */
export function addRetiredEndpointRoutes(router: ApiRouter) {
  router.add({
    method: 'post',
    path: '/endpoints',
    operationId: 'createEndpointV1',
    summary: 'Retired: create endpoints with POST /v2/projects/{projectId}/endpoints',
    tags: ['endpoints'],
    errors: [403],
    response: { status: 403, description: 'Always refused', schema: EmptyResponse },
    handler: async () => {
      throw forbidden(
        'Creating endpoints through POST /v1/endpoints is disabled. Use POST /v2/projects/{projectId}/endpoints, then add a deployment.',
        'endpoints_v1_create_access_disabled',
      );
    },
  });
}
