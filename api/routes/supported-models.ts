/**
 * The catalog of base models this installation supports (`/v2/supported-models`,
 * the official SDK's `beta.models.listSupported` and `retrieveSupported`):
 * today the fine-tunable bases of fine-tunes/models.ts, offered for fine-tuning
 * and as bases of registered and dedicated models. Certified deployment
 * profiles come with dedicated endpoints.
 */
import { listModelConfigs, type ModelConfigRow } from '../../db/model-configs';
import type { Queryable } from '../../db/pool';
import { catalogModelId, FINE_TUNE_MODELS, findCatalogModel, type FineTuneModel } from '../../fine-tunes/models';
import type { ApiDeps } from '../deps';
import type { ApiRouter } from '../route';
import { notFound } from '../errors';
import {
  ListSupportedModelsQuery,
  SupportedModelPageSchema,
  SupportedModelParams,
  SupportedModelSchema,
} from '../schemas/models';

/** When this catalog's entries were last revised (the SDK asks for created and updated times). */
const CATALOG_REVISED_AT = '2026-11-22T00:00:00.000Z';

/** Its deployment profiles: none where this installation has no model server for it. */
async function profilesOf(db: Queryable, projectId: string, m: FineTuneModel) {
  if (m.trainer.kind !== 'reference') return [];
  const configs = await listModelConfigs(db, projectId, { family: m.name, limit: 100 });
  return configs.map((c: ModelConfigRow) => {
    const selector = (key: string) => c.selectors.find((x) => x.key === key)?.value ?? '';
    return {
      profileId: c.id,
      certifiedConfigRevisionId: c.id,
      // No certification runs on this installation: no weights revision is certified.
      certifiedModelRevisionId: '',
      config: `projects/${c.project_id ?? 'public'}/configs/${c.id}`,
      model: `projects/public/models/${catalogModelId(m.name)}`,
      modelName: m.name,
      // The reference model server runs on CPU.
      gpuCount: selector('hardware') === 'cpu' ? 0 : 1,
      gpuType: selector('hardware'),
      parallelism: '',
      quantization: selector('dtype'),
      performanceBenchmarks: {},
    };
  });
}

async function toSupported(db: Queryable, projectId: string, m: FineTuneModel) {
  const slash = m.name.indexOf('/');
  const deploymentProfiles = await profilesOf(db, projectId, m);
  return {
    id: m.name,
    name: m.name,
    displayName: m.name.slice(slash + 1),
    displayType: 'chat',
    publisher: m.name.slice(0, slash),
    baseModel: `projects/public/models/${catalogModelId(m.name)}`,
    baseModelId: catalogModelId(m.name),
    capabilities: ['CAPABILITY_CHAT'],
    inputModalities: ['MODALITY_TEXT'],
    outputModalities: ['MODALITY_TEXT'],
    products: deploymentProfiles.length ? ['PRODUCT_FINE_TUNING', 'PRODUCT_DEDICATED'] : ['PRODUCT_FINE_TUNING'],
    status: 'SUPPORTED_MODEL_STATUS_SUPPORTED',
    deploymentProfiles,
    contextLength: String(m.limits.max_seq_length_sft),
    createdAt: CATALOG_REVISED_AT,
    updatedAt: CATALOG_REVISED_AT,
  };
}

export function addSupportedModelRoutes(router: ApiRouter, { db }: ApiDeps) {
  router.add({
    method: 'get',
    path: '/supported-models',
    operationId: 'listSupportedModels',
    summary: 'Base models this installation supports',
    tags: ['models'],
    strict: true,
    query: ListSupportedModelsQuery,
    response: {
      status: 200,
      description: 'Supported models',
      schema: SupportedModelPageSchema,
    },
    handler: async ({ query, principal }) => {
      const needle = query.search?.toLowerCase();
      const catalog = await Promise.all(FINE_TUNE_MODELS.map((m) => toSupported(db, principal.projectId, m)));
      let all = catalog.filter(
        (m) =>
          (!query.modality || m.inputModalities.includes(query.modality)) &&
          (!query.product || m.products.includes(query.product)) &&
          (!needle || m.id.toLowerCase().includes(needle)),
      );
      // The catalog is small and ordered: the cursor is the last id seen.
      if (query.after) all = all.slice(all.findIndex((m) => m.id === query.after) + 1);
      const page = all.slice(0, query.limit);
      return {
        object: 'list' as const,
        data: page,
        next_cursor: all.length > query.limit ? page[page.length - 1].id : null,
      };
    },
  });
  router.add({
    method: 'get',
    path: '/supported-models/:id',
    operationId: 'getSupportedModel',
    summary: 'One supported base model',
    tags: ['models'],
    strict: true,
    params: SupportedModelParams,
    errors: [404],
    response: { status: 200, description: 'The model', schema: SupportedModelSchema },
    handler: async ({ params, principal }) => {
      const m = findCatalogModel(params.id);
      if (!m) throw notFound(`Supported model '${params.id}' not found.`);
      return toSupported(db, principal.projectId, m);
    },
  });
}
