/**
 * How the model catalog (GET /v1/models) shows what a key can call: speech models priced per
 * minute, serverless catalog models priced per million tokens, and the project's dedicated
 * endpoints priced per replica-hour. The gateway's own model list uses the serverless ones.
 */
import type { z } from 'zod';
import type { SpeechModel } from '../../shared/audio';
import type { EndpointRow } from '../../db/endpoints';
import { AUDIO_MINUTE_PRICES, DEDICATED_TOKEN_PRICE, replicaHourPrice } from '../../shared/pricing';
import type { FineTuneModel } from '../../fine-tunes/models';
import { MODEL_SERVER_GPUS } from '../endpoint-serving';
import type { ModelObject as ModelObjectSchema } from '../schemas/models';

export type ModelObject = z.infer<typeof ModelObjectSchema>;

/** When the built-in catalog last changed (its models' `created`). */
const CATALOG_CREATED = Math.floor(Date.parse('2026-11-22T00:00:00Z') / 1000);

const organizationOf = (id: string) => (id.includes('/') ? id.slice(0, id.indexOf('/')) : 'gantry');

/**
 * The speech models the speech hosts serve now: called through /v1/audio/transcriptions and
 * /translations, priced per minute of audio.
 */
export function speechModelObjects(models: SpeechModel[]): ModelObject[] {
  return models.map((m): ModelObject => ({
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
  }));
}

/** What is known of a catalog model's origin: the real families name their publisher's repository. */
const CATALOG_SOURCES: Record<string, { license: string; link: string }> = {
  'HuggingFaceTB/SmolLM2-135M-Instruct': {
    license: 'Apache-2.0',
    link: 'https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct',
  },
};

/** Catalog models served serverless: called by name, priced per million tokens. */
export function serverlessModelObjects(models: FineTuneModel[]): ModelObject[] {
  return models.map((m): ModelObject => {
    const price = m.serverlessPricePerMillionTokens!;
    return {
      id: m.name,
      object: 'model',
      created: CATALOG_CREATED,
      type: 'chat',
      display_name: m.name.slice(m.name.indexOf('/') + 1),
      organization: organizationOf(m.name),
      ...CATALOG_SOURCES[m.name],
      context_length: m.limits.max_seq_length_sft,
      pricing: {
        base: 0,
        finetune: Number(m.pricePerMillionTokens.lora),
        hourly: 0,
        input: Number(price.input),
        output: Number(price.output),
      },
    };
  });
}

/**
 * A dedicated endpoint, called at the inference gateway as `<project_slug>/<name>`: the context
 * length of the model it serves (where known), and its price (per replica-hour; tokens cost nothing).
 */
export function endpointModelObject(
  e: EndpointRow,
  projectSlug: string,
  contextLength: number | undefined,
): ModelObject {
  return {
    id: `${projectSlug}/${e.name}`,
    object: 'model' as const,
    created: Math.floor(new Date(e.created_at).getTime() / 1000),
    type: 'chat' as const,
    display_name: e.name,
    organization: projectSlug,
    ...(contextLength ? { context_length: contextLength } : {}),
    pricing: {
      base: 0,
      finetune: 0,
      hourly: Number(replicaHourPrice(MODEL_SERVER_GPUS)),
      input: Number(DEDICATED_TOKEN_PRICE),
      output: Number(DEDICATED_TOKEN_PRICE),
    },
  };
}
