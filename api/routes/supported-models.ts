/**
 * The catalog of base models this installation supports (`/v2/supported-models`,
 * the official SDK's `beta.models.listSupported` and `retrieveSupported`):
 * today the fine-tunable bases of finetune/models.ts, offered for fine-tuning
 * and as bases of registered and dedicated models. Certified deployment
 * profiles come with dedicated endpoints.
 */
import { z } from 'zod';
import { FINE_TUNE_MODELS, type FineTuneModel } from '../../finetune/models';
import type { ApiRouter } from '../route';
import { notFound } from '../errors';

/** When this catalog's entries were last revised (the SDK asks for created and updated times). */
const CATALOG_REVISED_AT = '2026-11-22T00:00:00.000Z';

const SupportedModelSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    displayName: z.string(),
    displayType: z.string(),
    publisher: z.string(),
    baseModel: z.string(),
    baseModelId: z.string(),
    capabilities: z.array(z.string()),
    inputModalities: z.array(z.string()),
    outputModalities: z.array(z.string()),
    products: z.array(z.string()),
    status: z.string(),
    deploymentProfiles: z.array(z.unknown()),
    contextLength: z.string(),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'SupportedModel' });

function toSupported(m: FineTuneModel) {
  const slash = m.name.indexOf('/');
  return {
    id: m.name,
    name: m.name,
    displayName: m.name.slice(slash + 1),
    displayType: 'chat',
    publisher: m.name.slice(0, slash),
    baseModel: '',
    baseModelId: '',
    capabilities: ['CAPABILITY_CHAT'],
    inputModalities: ['MODALITY_TEXT'],
    outputModalities: ['MODALITY_TEXT'],
    products: ['PRODUCT_FINE_TUNING'],
    status: 'SUPPORTED_MODEL_STATUS_SUPPORTED',
    deploymentProfiles: [],
    contextLength: String(m.limits.max_seq_length_sft),
    createdAt: CATALOG_REVISED_AT,
    updatedAt: CATALOG_REVISED_AT,
  };
}

export function addSupportedModelRoutes(router: ApiRouter) {
  router.add({
    method: 'get',
    path: '/supported-models',
    operationId: 'listSupportedModels',
    summary: 'Base models this installation supports',
    tags: ['models'],
    strict: true,
    query: z.object({
      after: z.string().optional(),
      limit: z.coerce.number().int().min(1).max(100).default(100),
      modality: z.enum(['MODALITY_TEXT', 'MODALITY_IMAGE', 'MODALITY_AUDIO', 'MODALITY_VIDEO']).optional(),
      product: z.enum(['PRODUCT_SERVERLESS', 'PRODUCT_DEDICATED', 'PRODUCT_FINE_TUNING']).optional(),
      search: z.string().max(200).optional(),
    }),
    response: {
      status: 200,
      description: 'Supported models',
      schema: z.object({
        object: z.literal('list'),
        data: z.array(SupportedModelSchema),
        next_cursor: z.string().nullable(),
      }),
    },
    handler: async ({ query }) => {
      const needle = query.search?.toLowerCase();
      let all = FINE_TUNE_MODELS.map(toSupported).filter(
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
    params: z.object({ id: z.string().min(1).max(300) }),
    errors: [404],
    response: { status: 200, description: 'The model', schema: SupportedModelSchema },
    handler: async ({ params }) => {
      const m = FINE_TUNE_MODELS.find((x) => x.name === params.id);
      if (!m) throw notFound(`Supported model '${params.id}' not found.`);
      return toSupported(m);
    },
  });
}
