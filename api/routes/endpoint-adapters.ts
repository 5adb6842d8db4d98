/**
 * LoRA adapters on endpoint deployments
 * (`/v2/projects/{projectId}/endpoints/{endpointId}/deployments/{deploymentId}/adapters`,
 * the SDK's `beta.endpoints.adapters`): attach (starts the workflow
 * `adapter-load/<deployment>/<adapter>`), list by cursor, get, update the
 * desired revision (etag for optimistic concurrency: a stale etag is a 409),
 * detach (etag too). An adapter whose base model is not the deployment's is
 * attached but invalid, with the reason, and is never loaded.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import {
  deleteAdapterRow,
  getAdapter,
  insertAdapter,
  listAdapters,
  setDesiredRevision,
  type AdapterRow,
} from '../../db/endpoint-adapters';
import { getEndpoint, getEndpointDeployment, newEtag } from '../../db/endpoints';
import { findRegistryModelsByName, getRegistryModel, listRevisions } from '../../db/models';
import { FINE_TUNE_MODELS } from '../../fine-tunes/models';
import { detachSignal, setRevisionSignal, adapterLoad } from '../../workflows/adapters';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { signalWorkflow, startResourceWorkflowOrUndo } from '../workflows';
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

export const adapterWorkflowId = (deploymentId: string, adapterModelId: string) =>
  `adapter-load/${deploymentId}/${adapterModelId}`;

function toAdapter(a: AdapterRow, projectId: string) {
  const adapterModel = `projects/${projectId}/models/${a.adapter_model_id}`;
  return {
    id: a.adapter_model_id,
    adapterModelId: a.adapter_model_id,
    adapterModel,
    desiredRevisionId: a.desired_revision_id,
    desiredRevision: `${adapterModel}/revisions/${a.desired_revision_id}`,
    etag: a.etag,
    adapterValid: a.adapter_valid,
    ...(a.adapter_valid_reason ? { adapterValidReason: a.adapter_valid_reason } : {}),
    perCluster: [
      {
        clusterId: a.cluster_id,
        adapterModelId: a.adapter_model_id,
        adapterModel,
        state: a.state,
        readyPodCount: a.ready_pods,
        failedPodCount: a.failed_pods,
        totalPodCount: a.total_pods,
        adapterValid: a.adapter_valid,
        ...(a.adapter_valid_reason ? { adapterValidReason: a.adapter_valid_reason } : {}),
        ...(a.realized_revision_id
          ? {
              realizedRevisionId: a.realized_revision_id,
              realizedRevision: `${adapterModel}/revisions/${a.realized_revision_id}`,
            }
          : {}),
        ...(a.realized_etag ? { realizedEtag: a.realized_etag } : {}),
        ...(a.reason ? { reason: a.reason } : {}),
        ...(a.message ? { message: a.message } : {}),
        ...(a.loaded_at ? { loadedAt: new Date(a.loaded_at).toISOString() } : {}),
        updatedAt: new Date(a.updated_at).toISOString(),
      },
    ],
  };
}

export function addEndpointAdapterRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal, config } = deps;

  async function requireDeployment(principal: Principal, p: z.infer<typeof AdapterDeploymentParams>) {
    const e = await getEndpoint(db, principal.projectId, p.endpointId);
    if (!e) throw notFound(`Endpoint '${p.endpointId}' not found.`);
    const d = await getEndpointDeployment(db, e.id, p.deploymentId);
    if (!d) throw notFound(`Endpoint '${e.name}' has no deployment '${p.deploymentId}'.`);
    return d;
  }
  async function requireAdapter(deploymentId: string, id: string) {
    const a = await getAdapter(db, deploymentId, id);
    if (!a) throw notFound(`Adapter '${id}' is not attached to this deployment.`);
    return a;
  }
  const checkEtag = (a: AdapterRow, etag: string) => {
    if (etag !== a.etag)
      throw conflict(
        `Adapter '${a.adapter_model_id}' changed since you read it (etag ${etag} is stale); read it again.`,
        'etag_mismatch',
      );
  };
  /** The adapter's usable revision (the newest unless named); 400 naming the field otherwise. */
  async function usableRevision(modelId: string, revisionId: string | undefined, param: string) {
    const usable = (await listRevisions(db, modelId)).filter(
      (r) => r.validation_status === 'REVISION_VALIDATION_STATUS_SUCCESS',
    );
    const revision = revisionId ? usable.find((r) => r.id === revisionId) : usable[0];
    if (!revision)
      throw badRequest(
        `Adapter model '${modelId}' has no usable revision${revisionId ? ` '${revisionId}'` : ''}.`,
        param,
      );
    return revision;
  }
  const signal = async (a: AdapterRow, name: 'detach' | 'setRevision', arg?: { revisionId: string; etag: string }) => {
    const workflowId = adapterWorkflowId(a.deployment_id, a.adapter_model_id);
    if (name === 'detach') await signalWorkflow(temporal, workflowId, detachSignal, [], null);
    else await signalWorkflow(temporal, workflowId, setRevisionSignal, [arg!], null);
  };

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
      const d = await requireDeployment(principal, params);
      if (!d.enable_lora) throw badRequest(`Deployment '${d.name}' was created without enableLora.`, 'deploymentId');
      if (!d.container_deployment_id || d.deleting)
        throw conflict(`Deployment '${d.name}' is not serving.`, 'deployment_not_serving');
      const model =
        (await getRegistryModel(db, principal.projectId, body.adapterModelId)) ??
        (await findRegistryModelsByName(db, principal.projectId, body.adapterModelId))[0];
      if (!model)
        throw badRequest(`Model '${body.adapterModelId}' is not registered in this project.`, 'adapterModelId');
      if (model.weights_type !== 'WEIGHTS_TYPE_ADAPTER')
        throw badRequest(`Model '${model.id}' is not an adapter.`, 'adapterModelId');
      if (await getAdapter(db, d.id, model.id))
        throw conflict(`Adapter '${model.id}' is attached already.`, 'adapter_exists');
      const revision = await usableRevision(model.id, body.adapterRevisionId, 'adapterRevisionId');
      // A deployment holds so many adapters; one more evicts the oldest, when asked to (force).
      const held = (await listAdapters(db, d.id, undefined, 10_000)).filter(
        (a) => a.state !== 'ADAPTER_LOAD_STATE_REMOVING',
      );
      if (held.length >= config.adaptersPerDeployment) {
        const oldest = held.reduce((a, b) => (b.created_at < a.created_at ? b : a));
        if (!body.force) {
          throw conflict(
            `Deployment '${d.name}' holds ${held.length} adapters, its capacity; attach with force: true to evict the oldest (${oldest.adapter_model_id}).`,
            'adapter_capacity',
          );
        }
        if (oldest.adapter_valid) await signal(oldest, 'detach');
        else await deleteAdapterRow(db, d.id, oldest.adapter_model_id);
      }
      // The deployment's base: its catalog model, or the base its registered model derives from.
      const deployed = FINE_TUNE_MODELS.some((m) => m.name === d.model_id)
        ? d.model_id
        : (await getRegistryModel(db, principal.projectId, d.model_id))?.base_model;
      const valid = model.base_model === deployed;
      const etag = newEtag();
      await insertAdapter(db, {
        deploymentId: d.id,
        adapterModelId: model.id,
        revisionId: revision.id,
        etag,
        valid,
        validReason: valid
          ? undefined
          : `The adapter was trained on ${model.base_model ?? 'an unknown base'}; this deployment serves ${deployed ?? 'an unknown base'}.`,
      });
      if (valid) {
        // No workflow, no attachment: the row goes with the failed start.
        await startResourceWorkflowOrUndo(
          temporal,
          {
            workflow: adapterLoad,
            workflowId: adapterWorkflowId(d.id, model.id),
            args: [
              {
                deploymentId: d.id,
                containerDeploymentId: d.container_deployment_id,
                adapterModelId: model.id,
                revisionId: revision.id,
                etag,
                resyncSeconds: config.adapterResyncSeconds,
              },
            ],
            projectId: principal.projectId,
            resourceType: 'endpoint-adapter',
            resourceId: `${d.id}/${model.id}`,
            status: 'ADAPTER_LOAD_STATE_PENDING',
            summary: `Adapter ${model.id} on ${d.id}`,
            details: `Attached by API key \`${principal.apiKeyId}\`; revision ${revision.id}.`,
          },
          () => deleteAdapterRow(db, d.id, model.id),
        ).catch((err: unknown) => {
          if (err instanceof WorkflowExecutionAlreadyStartedError) {
            // Its previous attachment's workflow is still unloading it from the replicas.
            throw conflict(
              `Adapter '${model.id}' is still being removed from deployment '${d.name}'; attach it again in a moment.`,
              'adapter_removing',
            );
          }
          throw err;
        });
      }
      return toAdapter((await getAdapter(db, d.id, model.id))!, principal.projectId);
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
      const d = await requireDeployment(principal, params);
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
      const d = await requireDeployment(principal, params);
      return toAdapter(await requireAdapter(d.id, params.id), principal.projectId);
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
      const d = await requireDeployment(principal, params);
      const a = await requireAdapter(d.id, params.id);
      checkEtag(a, body.etag);
      const revision = await usableRevision(a.adapter_model_id, body.adapterRevisionId, 'adapterRevisionId');
      const etag = newEtag();
      await setDesiredRevision(db, d.id, a.adapter_model_id, revision.id, etag);
      if (a.adapter_valid) await signal(a, 'setRevision', { revisionId: revision.id, etag });
      return toAdapter((await getAdapter(db, d.id, a.adapter_model_id))!, principal.projectId);
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
      const d = await requireDeployment(principal, params);
      const a = await requireAdapter(d.id, params.id);
      checkEtag(a, query.etag);
      if (a.adapter_valid) await signal(a, 'detach');
      else await deleteAdapterRow(db, d.id, a.adapter_model_id); // never loaded: nothing to unload
      return {};
    },
  });
}
