/** Evaluations (`/v1/evaluation`; the SDKs' `evals`): what the API takes and answers, as the pinned SDKs type it. */
import { z } from 'zod';
import { EVALUATION_STATUSES, EVALUATION_TYPES, MODEL_SOURCES } from '../../shared/evaluations';

const template = z.string().max(100_000);
/** The official CLI sends unset options as null; null is taken as not given. */
const optional = <T extends z.ZodType>(schema: T) => schema.nullish().transform((v) => v ?? undefined);

const external = {
  external_base_url: optional(z.string().url().max(2048)).describe(
    "An OpenAI-compatible API's base URL (…/v1); required with model_source external; public addresses only",
  ),
  external_api_token: optional(z.string().max(4096)).describe('Its bearer token; stored sealed, never shown again'),
  num_workers: optional(z.number().int().min(1).max(64)),
};

export const ModelRequestSchema = z.object({
  model: z.string().min(1).max(256),
  model_source: z.enum(MODEL_SOURCES),
  system_template: optional(template).describe('Jinja2 over the row’s columns (empty when null)'),
  input_template: template.describe('Jinja2 over the row’s columns: the user message'),
  max_tokens: z.number().int().min(1).max(32768),
  temperature: optional(z.number().min(0).max(2)).describe('Sampling temperature (default 0.7 when null)'),
  ...external,
});

/** A column of the file holding pre-generated text, or a model that generates it first. */
const Candidate = z.union([z.string().min(1).max(256), ModelRequestSchema]);

export const JudgeSchema = z.object({
  model: z.string().min(1).max(256),
  model_source: z.enum(MODEL_SOURCES),
  system_template: template.describe('Jinja2 over the row’s columns: what the judge is asked'),
  max_tokens: optional(z.number().int().min(1).max(32768)),
  temperature: optional(z.number().min(0).max(2)),
  ...external,
});

const common = {
  input_data_file_path: z.string().min(1).max(128).describe('A file of purpose eval: one JSON object (row) per line'),
  judge: JudgeSchema,
};
const label = z.string().min(1).max(256);

export const CreateEvaluationBody = z.discriminatedUnion('type', [
  z.object({
    type: z.literal('classify'),
    parameters: z.object({
      ...common,
      labels: z.array(label).min(2).max(100),
      pass_labels: z.array(label).min(1).max(100),
      model_to_evaluate: optional(Candidate),
    }),
  }),
  z.object({
    type: z.literal('score'),
    parameters: z.object({
      ...common,
      min_score: z.number(),
      max_score: z.number(),
      pass_threshold: z.number(),
      model_to_evaluate: optional(Candidate),
    }),
  }),
  z.object({
    type: z.literal('compare'),
    parameters: z.object({
      ...common,
      model_a: Candidate,
      model_b: Candidate,
      disable_position_bias_correction: optional(z.boolean()),
    }),
  }),
]);

export const EvaluationParams = z.object({ id: z.string().min(1).max(128) });
export const ListEvaluationsQuery = z.object({
  status: z.enum(EVALUATION_STATUSES).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
});

const Results = z
  .object({
    result_file_id: z.string().optional(),
    generation_fail_count: z.number().optional(),
    judge_fail_count: z.number().optional(),
    invalid_label_count: z.number().optional(),
    label_counts: z.string().optional().describe('JSON: each label and how many rows the judge gave it'),
    pass_percentage: z.number().optional(),
    invalid_score_count: z.number().optional(),
    failed_samples: z.number().optional(),
    aggregated_scores: z
      .object({ mean_score: z.number().optional(), std_score: z.number().optional(), pass_percentage: z.number() })
      .optional(),
    A_wins: z.number().int().optional(),
    B_wins: z.number().int().optional(),
    Ties: z.number().int().optional(),
    error: z.string().optional(),
  })
  .meta({ id: 'EvaluationResults' });

export const EvaluationJobSchema = z
  .object({
    workflow_id: z.string(),
    type: z.enum(EVALUATION_TYPES),
    status: z.enum(EVALUATION_STATUSES),
    owner_id: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()),
    results: Results.nullable(),
    status_updates: z.array(z.object({ status: z.string(), message: z.string(), timestamp: z.string() })),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'EvaluationJob' });

export const CreateEvaluationResponseSchema = z.object({ workflow_id: z.string(), status: z.literal('pending') });
export const EvaluationStatusSchema = z.object({ status: z.enum(EVALUATION_STATUSES), results: Results.nullable() });
export const EvaluationListSchema = z.array(EvaluationJobSchema);
