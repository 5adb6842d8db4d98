/**
 * LoRA adapters on endpoint deployments: attaching one (its row, and the workflow
 * `adapter-load/<deployment>/<adapter>` that loads it onto every replica; an adapter trained on
 * another base is attached invalid, with the reason, and never loaded), moving one to another
 * revision and detaching one (both with the etag read last: a stale one is a 409).
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
import { getEndpoint, getEndpointDeployment, newEtag, type EndpointDeploymentRow } from '../../db/endpoints';
import { findRegistryModelsByName, getRegistryModel, listRevisions } from '../../db/models';
import type { Db } from '../../db/pool';
import { FINE_TUNE_MODELS } from '../../fine-tunes/models';
import { adapterLoadWorkflowId } from '../../shared/adapter-loads';
import { adapterLoad, detachSignal, setRevisionSignal } from '../../workflows/adapters';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type {
  AdapterDeploymentParams,
  AttachEndpointAdapterBody,
  UpdateEndpointAdapterBody,
} from '../schemas/endpoints';
import { signalWorkflow, startResourceWorkflowOrUndo } from '../workflows';

/** The endpoint's deployment the path names, in the caller's project; 404 otherwise. */
export async function requireAdapterDeployment(
  db: Db,
  principal: Principal,
  p: z.infer<typeof AdapterDeploymentParams>,
): Promise<EndpointDeploymentRow> {
  const e = await getEndpoint(db, principal.projectId, p.endpointId);
  if (!e) throw notFound(`Endpoint '${p.endpointId}' not found.`);
  const d = await getEndpointDeployment(db, e.id, p.deploymentId);
  if (!d) throw notFound(`Endpoint '${e.name}' has no deployment '${p.deploymentId}'.`);
  return d;
}

/** The adapter attached to the deployment; 404 otherwise. */
export async function requireAdapter(db: Db, deploymentId: string, id: string): Promise<AdapterRow> {
  const a = await getAdapter(db, deploymentId, id);
  if (!a) throw notFound(`Adapter '${id}' is not attached to this deployment.`);
  return a;
}

/** A change must name the etag read last: another writer's change since is a 409. */
const checkEtag = (a: AdapterRow, etag: string) => {
  if (etag !== a.etag)
    throw conflict(
      `Adapter '${a.adapter_model_id}' changed since you read it (etag ${etag} is stale); read it again.`,
      'etag_mismatch',
    );
};

/** The adapter's usable revision (the newest unless named); 400 naming the field otherwise. */
async function usableRevision(db: Db, modelId: string, revisionId: string | undefined, param: string) {
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

/** Tells the adapter's load workflow to detach it or to load another revision. */
const signal = async (
  temporal: ApiDeps['temporal'],
  a: AdapterRow,
  name: 'detach' | 'setRevision',
  arg?: { revisionId: string; etag: string },
) => {
  const workflowId = adapterLoadWorkflowId(a.deployment_id, a.adapter_model_id);
  if (name === 'detach') await signalWorkflow(temporal, workflowId, detachSignal, [], null);
  else await signalWorkflow(temporal, workflowId, setRevisionSignal, [arg!], null);
};

/** Attaches an adapter model to deployment `d` (evicting the oldest when at capacity and `force`); its row. */
export async function attachAdapter(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  d: EndpointDeploymentRow,
  body: z.infer<typeof AttachEndpointAdapterBody>,
): Promise<AdapterRow> {
  const { db, temporal, config } = deps;
  if (!d.enable_lora) throw badRequest(`Deployment '${d.name}' was created without enableLora.`, 'deploymentId');
  if (!d.container_deployment_id || d.deleting)
    throw conflict(`Deployment '${d.name}' is not serving.`, 'deployment_not_serving');
  const model =
    (await getRegistryModel(db, principal.projectId, body.adapterModelId)) ??
    (await findRegistryModelsByName(db, principal.projectId, body.adapterModelId))[0];
  if (!model) throw badRequest(`Model '${body.adapterModelId}' is not registered in this project.`, 'adapterModelId');
  if (model.weights_type !== 'WEIGHTS_TYPE_ADAPTER')
    throw badRequest(`Model '${model.id}' is not an adapter.`, 'adapterModelId');
  if (await getAdapter(db, d.id, model.id))
    throw conflict(`Adapter '${model.id}' is attached already.`, 'adapter_exists');
  const revision = await usableRevision(db, model.id, body.adapterRevisionId, 'adapterRevisionId');
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
    if (oldest.adapter_valid) await signal(temporal, oldest, 'detach');
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
        workflowId: adapterLoadWorkflowId(d.id, model.id),
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
  return (await getAdapter(db, d.id, model.id))!;
}

/** Moves an attached adapter to another usable revision; its row. */
export async function moveAdapter(
  deps: Pick<ApiDeps, 'db' | 'temporal'>,
  deploymentId: string,
  adapterId: string,
  body: z.infer<typeof UpdateEndpointAdapterBody>,
): Promise<AdapterRow> {
  const { db, temporal } = deps;
  const a = await requireAdapter(db, deploymentId, adapterId);
  checkEtag(a, body.etag);
  const revision = await usableRevision(db, a.adapter_model_id, body.adapterRevisionId, 'adapterRevisionId');
  const etag = newEtag();
  await setDesiredRevision(db, deploymentId, a.adapter_model_id, revision.id, etag);
  if (a.adapter_valid) await signal(temporal, a, 'setRevision', { revisionId: revision.id, etag });
  return (await getAdapter(db, deploymentId, a.adapter_model_id))!;
}

/** Detaches an adapter: unloaded from every replica by its workflow, or removed at once when never loaded. */
export async function detachAdapter(
  deps: Pick<ApiDeps, 'db' | 'temporal'>,
  deploymentId: string,
  adapterId: string,
  etag: string,
): Promise<void> {
  const { db, temporal } = deps;
  const a = await requireAdapter(db, deploymentId, adapterId);
  checkEtag(a, etag);
  if (a.adapter_valid) await signal(temporal, a, 'detach');
  else await deleteAdapterRow(db, deploymentId, a.adapter_model_id); // never loaded: nothing to unload
}
