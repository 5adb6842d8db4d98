/**
 * The model catalog (`GET /v1/models`, the official SDK's `models.list`):
 * what a key of this project can call. The fine-tunable bases (type `chat`),
 * the speech models (type `transcribe`), the project's dedicated
 * endpoints (called by their endpoint string), and its registered and
 * fine-tuned models (deployed by their qualified name `<project_slug>/<name>`).
 * `dedicated=true` keeps only the dedicated endpoints. `GET /v1/models/{id}`
 * reads one; an unknown id is a 404. Pricing is given where Gantry has a
 * price (common/pricing.ts): fine-tuning per million trained tokens
 * (`finetune`), speech per minute of audio (`base`).
 */
import { z } from 'zod';
import { SPEECH_MODELS } from '../../common/audio';
import { AUDIO_MINUTE_PRICES } from '../../common/pricing';
import { listEndpoints } from '../../db/endpoints';
import { listRegistryModels, qualifiedModelName } from '../../db/registry';
import { FINE_TUNE_MODELS } from '../../finetune/models';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';

/** When the built-in catalog last changed (its models' `created`). */
const CATALOG_CREATED = Math.floor(Date.parse('2026-11-22T00:00:00Z') / 1000);

const ModelObject = z
  .object({
    id: z.string(),
    object: z.literal('model'),
    created: z.number(),
    type: z.enum([
      'chat',
      'language',
      'code',
      'image',
      'embedding',
      'moderation',
      'rerank',
      'audio',
      'transcribe',
      'video',
    ]),
    display_name: z.string(),
    organization: z.string(),
    link: z.string().optional(),
    license: z.string().optional(),
    context_length: z.number().optional(),
    pricing: z
      .object({
        base: z.number(),
        finetune: z.number(),
        hourly: z.number(),
        input: z.number(),
        output: z.number(),
        cached_input: z.number().optional(),
      })
      .optional(),
  })
  .meta({ id: 'ModelObject' });
type ModelObject = z.infer<typeof ModelObject>;

const organizationOf = (id: string) => (id.includes('/') ? id.slice(0, id.indexOf('/')) : 'gantry');

function builtIn(): ModelObject[] {
  return [
    ...FINE_TUNE_MODELS.map((m): ModelObject => ({
      id: m.name,
      object: 'model',
      created: CATALOG_CREATED,
      type: 'chat',
      display_name: m.name.slice(m.name.indexOf('/') + 1),
      organization: organizationOf(m.name),
      context_length: m.limits.max_seq_length_sft,
      pricing: { base: 0, finetune: Number(m.pricePerMillionTokens.lora), hourly: 0, input: 0, output: 0 },
    })),
    ...SPEECH_MODELS.map((m): ModelObject => ({
      id: m.id,
      object: 'model',
      created: CATALOG_CREATED,
      type: 'transcribe',
      display_name: m.displayName,
      organization: organizationOf(m.id),
      license: 'MIT',
      link: 'https://github.com/openai/whisper',
      context_length: m.contextLength,
      pricing: { base: Number(AUDIO_MINUTE_PRICES[m.id]), finetune: 0, hourly: 0, input: 0, output: 0 },
    })),
  ];
}

export function addModelCatalogRoutes(router: ApiRouter, { db }: ApiDeps) {
  async function dedicated(projectId: string, projectSlug: string): Promise<ModelObject[]> {
    const endpoints = await listEndpoints(db, projectId, undefined, 1000);
    return endpoints.map((e) => ({
      id: `${projectSlug}/${e.name}`,
      object: 'model',
      created: Math.floor(new Date(e.created_at).getTime() / 1000),
      type: 'chat',
      display_name: e.name,
      organization: projectSlug,
    }));
  }

  /** The project's registered models, fine-tuned outputs among them (and those shared with it). */
  async function registered(projectId: string, organizationId: string): Promise<ModelObject[]> {
    const models = await listRegistryModels(db, { projectId, organizationId, limit: 1000 });
    return models.map((m) => ({
      id: qualifiedModelName(m),
      object: 'model',
      created: Math.floor(m.created_at.getTime() / 1000),
      type: 'chat',
      display_name: m.name,
      organization: m.project_slug ?? m.organization_id,
      ...(m.context_length ? { context_length: m.context_length } : {}),
    }));
  }
  const everything = async (p: { projectId: string; projectSlug: string; organizationId: string }) => [
    ...builtIn(),
    ...(await dedicated(p.projectId, p.projectSlug)),
    ...(await registered(p.projectId, p.organizationId)),
  ];

  router.add({
    method: 'get',
    path: '/models',
    operationId: 'listModels',
    summary:
      'Every model this key can use: catalog bases, speech models, the project’s endpoints and registered models',
    tags: ['models'],
    query: z.object({
      dedicated: z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean()).optional(),
    }),
    response: { status: 200, description: 'Model objects', schema: z.array(ModelObject) },
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
      params: z.object({ org: z.string().max(200).optional(), name: z.string().max(200) }),
      errors: [404],
      response: { status: 200, description: 'The model', schema: ModelObject },
      handler: async ({ params, principal }) => {
        const id = params.org ? `${params.org}/${params.name}` : params.name;
        // An endpoint string comes before a registered model of the same name: it is what inference calls.
        const found = (await everything(principal)).find((m) => m.id === id);
        if (!found) throw notFound(`No model '${id}' is available to this key.`, 'model_not_found');
        return found;
      },
    });
  }
}
