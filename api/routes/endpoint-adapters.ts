/**
 * LoRA adapters on endpoint deployments
 * (`/v2/projects/{projectId}/endpoints/{endpointId}/deployments/{deploymentId}/adapters`,
 * the SDK's `beta.endpoints.adapters`): attach (starts the workflow
 * `adapter-load/<deployment>/<adapter>`), list by cursor, get, update the
 * desired revision (etag for optimistic concurrency: a stale etag is a 409),
 * detach (etag too). An adapter whose base model is not the deployment's is
 * attached but invalid, with the reason, and is never loaded.
 */
import { listAdapters } from '../../db/endpoint-adapters';
import type { ApiDeps } from '../deps';
import type { ApiRouter } from '../route';
import { cursorPage } from '../cursor-pages';
import {
  AdapterDeploymentParams,
  AdapterParams,
  AttachEndpointAdapterBody,
  DetachEndpointAdapterQuery,
  EndpointAdapterListSchema,
  EndpointAdapterSchema,
  ListEndpointAdaptersQuery,
  UpdateEndpointAdapterBody,
} from '../schemas/endpoints';
import { EmptyResponse } from '../schemas/common';
import {
  attachAdapter,
  detachAdapter,
  moveAdapter,
  requireAdapter,
  requireAdapterDeployment,
} from '../use-cases/endpoint-adapters';
import { toAdapter } from '../presenters/endpoint-adapters';

export function addEndpointAdapterRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  router.add({
    method: 'post',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:deploymentId/adapters',
    projectScope: 'key',
    operationId: 'attachEndpointAdapter',
    summary: 'Attach a LoRA adapter (a registered adapter model) to a deployment; it is loaded onto every replica',
    tags: ['endpoints'],
    strict: true,
    params: AdapterDeploymentParams,
    body: AttachEndpointAdapterBody,
    errors: [404, 409],
    response: { status: 200, description: 'The adapter', schema: EndpointAdapterSchema },
    handler: async ({ params, body, principal }) => {
      const d = await requireAdapterDeployment(db, principal, params);
      return toAdapter(await attachAdapter(deps, principal, d, body), principal.projectId);
    },
  });
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:deploymentId/adapters',
    projectScope: 'key',
    operationId: 'listEndpointAdapters',
    summary: "A deployment's adapters with their load state (limit, after: cursor)",
    tags: ['endpoints'],
    strict: true,
    params: AdapterDeploymentParams,
    query: ListEndpointAdaptersQuery,
    errors: [404],
    response: {
      status: 200,
      description: 'Adapters',
      schema: EndpointAdapterListSchema,
    },
    handler: async ({ params, query, principal }) => {
      const d = await requireAdapterDeployment(db, principal, params);
      const rows = await listAdapters(db, d.id, query.after, query.limit + 1);
      return cursorPage(
        rows,
        query.limit,
        (last) => last.adapter_model_id,
        (a) => toAdapter(a, principal.projectId),
      );
    },
  });
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:deploymentId/adapters/:id',
    projectScope: 'key',
    operationId: 'getEndpointAdapter',
    summary: 'An adapter and its load state',
    tags: ['endpoints'],
    strict: true,
    params: AdapterParams,
    errors: [404],
    response: { status: 200, description: 'The adapter', schema: EndpointAdapterSchema },
    handler: async ({ params, principal }) => {
      const d = await requireAdapterDeployment(db, principal, params);
      return toAdapter(await requireAdapter(db, d.id, params.id), principal.projectId);
    },
  });
  router.add({
    method: 'patch',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:deploymentId/adapters/:id',
    projectScope: 'key',
    operationId: 'updateEndpointAdapter',
    summary: 'Move an adapter to another revision (etag required: a stale one is refused)',
    tags: ['endpoints'],
    strict: true,
    params: AdapterParams,
    body: UpdateEndpointAdapterBody,
    errors: [404, 409],
    response: { status: 200, description: 'The adapter', schema: EndpointAdapterSchema },
    handler: async ({ params, body, principal }) => {
      const d = await requireAdapterDeployment(db, principal, params);
      return toAdapter(await moveAdapter(deps, d.id, params.id, body), principal.projectId);
    },
  });
  router.add({
    method: 'delete',
    path: '/projects/:projectId/endpoints/:endpointId/deployments/:deploymentId/adapters/:id',
    projectScope: 'key',
    operationId: 'detachEndpointAdapter',
    summary: 'Detach an adapter: it is unloaded from every replica, then gone (etag required)',
    tags: ['endpoints'],
    strict: true,
    params: AdapterParams,
    query: DetachEndpointAdapterQuery,
    errors: [404, 409],
    response: { status: 200, description: 'Detach accepted', schema: EmptyResponse },
    handler: async ({ params, query, principal }) => {
      const d = await requireAdapterDeployment(db, principal, params);
      await detachAdapter(deps, d.id, params.id, query.etag);
      return {};
    },
  });
}
