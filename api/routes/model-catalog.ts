/**
 * The model catalog (`GET /v1/models`, the official SDK's `models.list`): what a key of this
 * project can call, each with its context length and price (shared/pricing.ts). The speech
 * models (type `transcribe`, priced per minute of audio in `base`), the catalog models the
 * platform's serverless pools serve (called at the gateway by their name; priced per million
 * input and output tokens in `input` and `output`, api/serverless-pools.ts), and the project's
 * dedicated endpoints (called by their endpoint string `<project_slug>/<name>`; priced per
 * replica-hour in `hourly`, tokens free). Another fine-tunable base or a registered model is
 * called once it is deployed behind an endpoint; until then it is listed where it can be used
 * (`/v2/supported-models`, `/v2/projects/{p}/models`), not here. `dedicated=true` keeps only the
 * endpoints. `GET /v1/models/{id}` reads one; an unknown id is a 404.
 */
import { listEndpointDeployments, listEndpoints } from '../../db/endpoints';
import { getRegistryModel } from '../../db/models';
import { findCatalogModel } from '../../fine-tunes/models';
import type { ApiDeps } from '../deps';
import { pooledServerlessModels } from '../serverless-pools';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import type { ServedSpeechModels } from '../speech-models';
import {
  ListModelObjectsQuery,
  ModelObject as ModelObjectSchema,
  ModelObjectListSchema,
  ModelObjectParams,
} from '../schemas/models';
import {
  endpointModelObject,
  serverlessModelObjects,
  speechModelObjects,
  type ModelObject,
} from '../presenters/model-catalog';

export function addModelCatalogRoutes(router: ApiRouter, { db }: ApiDeps, speechModels: ServedSpeechModels) {
  /** The longest context the model behind a deployment takes (a catalog base, or a registered model). */
  async function contextLength(projectId: string, modelId: string): Promise<number | undefined> {
    const base = findCatalogModel(modelId);
    if (base) return base.limits.max_seq_length_sft;
    return (await getRegistryModel(db, projectId, modelId))?.context_length ?? undefined;
  }

  /**
   * The project's dedicated endpoints, called at the inference gateway as `<project_slug>/<name>`:
   * the context length of the model they serve, and their price (per replica-hour; tokens cost nothing).
   */
  async function dedicated(projectId: string, projectSlug: string): Promise<ModelObject[]> {
    const endpoints = await listEndpoints(db, projectId, undefined, 1000);
    return Promise.all(
      endpoints.map(async (e) => {
        const serving = (await listEndpointDeployments(db, e.id)).find((d) => !d.failure && !d.deleting);
        const context = serving && (await contextLength(projectId, serving.model_id));
        return endpointModelObject(e, projectSlug, context);
      }),
    );
  }

  // Only what can be called: a catalog model without a serverless pool, or a registered model, is
  // called once deployed behind an endpoint (listed at /v2/supported-models, /v2/projects/{p}/models).
  const everything = async (p: { projectId: string; projectSlug: string }) => [
    ...speechModelObjects(await speechModels.list()),
    ...serverlessModelObjects(await pooledServerlessModels(db)),
    ...(await dedicated(p.projectId, p.projectSlug)),
  ];

  router.add({
    method: 'get',
    path: '/models',
    operationId: 'listModels',
    summary:
      'Every model this key can call: the speech models, the serverless models and the project’s dedicated endpoints',
    tags: ['models'],
    query: ListModelObjectsQuery,
    response: { status: 200, description: 'Model objects', schema: ModelObjectListSchema },
    handler: async ({ query, principal }) => {
      return query.dedicated ? dedicated(principal.projectId, principal.projectSlug) : everything(principal);
    },
  });
  // Ids are `org/name` (catalog models, endpoint strings) or a bare name.
  for (const path of ['/models/:org/:name', '/models/:name']) {
    router.add({
      method: 'get',
      path,
      operationId: path.includes(':org') ? 'getModel' : 'getModelByBareId',
      summary: 'One model of the catalog, by id',
      tags: ['models'],
      params: ModelObjectParams,
      errors: [404],
      response: { status: 200, description: 'The model', schema: ModelObjectSchema },
      handler: async ({ params, principal }) => {
        const id = params.org ? `${params.org}/${params.name}` : params.name;
        const found = (await everything(principal)).find((m) => m.id === id);
        if (!found) throw notFound(`No model '${id}' is available to this key.`, 'model_not_found');
        return found;
      },
    });
  }
}
