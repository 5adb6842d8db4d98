import { z } from 'zod';
import { FINE_TUNE_STATUSES } from '../../shared/fine-tunes';
import { IsoDateTime, listOf, QueryFlag, TIMESTAMP_FORM } from './common';

const LrScheduler = z.object({
  lr_scheduler_type: z.enum(['linear', 'cosine']).default('cosine'),
  lr_scheduler_args: z
    .object({
      min_lr_ratio: z.number().min(0).max(1).optional(),
      num_cycles: z.number().min(0).optional(),
    })
    .optional(),
});

const TrainOnInputs = z.union([z.boolean(), z.literal('auto')]);

/**
 * The Python SDK spells "not set" as an empty string: `validation_file=""` is the default of
 * `fine_tuning.create`, and its price estimate sends `model=""` for a job from a checkpoint.
 */
const blankAsUnset = (v: unknown) => (v === '' ? undefined : v);

export const CreateFineTuneBody = z
  .object({
    model: z.preprocess(blankAsUnset, z.string().optional()),
    // The Python CLI sends "" when no checkpoint is named.
    from_checkpoint: z.preprocess(blankAsUnset, z.string().optional()),
    training_file: z.string().min(1),
    validation_file: z.preprocess(blankAsUnset, z.string().optional()),
    suffix: z.string().max(40, 'must be at most 40 characters').optional(),
    n_epochs: z.number().int().min(1).optional(),
    n_checkpoints: z.number().int().min(1).optional(),
    n_evals: z.number().int().min(0).optional(),
    batch_size: z.union([z.number().int().min(1), z.literal('max')]).optional(),
    learning_rate: z.number().positive().optional(),
    lr_scheduler: LrScheduler.optional(),
    warmup_ratio: z.number().min(0).max(1).optional(),
    max_grad_norm: z.number().min(0).optional(),
    weight_decay: z.number().min(0).optional(),
    random_seed: z.number().int().min(0).nullable().optional(),
    max_seq_length: z.number().int().positive().optional(),
    packing: z.boolean().optional(),
    train_on_inputs: TrainOnInputs.optional(),
    training_method: z
      .discriminatedUnion('method', [
        z.object({ method: z.literal('sft'), train_on_inputs: TrainOnInputs.optional() }),
        z.object({
          method: z.literal('dpo'),
          // The Python SDK's price estimate spells an unset beta as 0 (`dpo_beta or 0`); a beta of 0
          // would make the loss constant, so 0 reads as unset (the default), as there.
          dpo_beta: z.preprocess((v) => (v === 0 ? undefined : v), z.number().positive().optional()),
          dpo_normalize_logratios_by_length: z.boolean().optional(),
          dpo_reference_free: z.boolean().optional(),
          rpo_alpha: z.number().min(0).optional().describe("RPO: weight of the chosen answer's NLL"),
          simpo_gamma: z.number().min(0).optional().describe('SimPO: margin (length-normalized, reference-free)'),
        }),
      ])
      .optional(),
    training_type: z
      .discriminatedUnion('type', [
        z.object({ type: z.literal('Full') }),
        z.object({
          type: z.literal('Lora'),
          lora_r: z.number().int().min(1).optional(),
          lora_alpha: z.number().min(1).optional(),
          lora_dropout: z.number().min(0).max(1).optional(),
          lora_trainable_modules: z.string().optional(),
        }),
      ])
      .nullable()
      .optional(),
    early_stopping_enabled: z.boolean().optional(),
    early_stopping_patience: z.number().int().min(1).optional(),
    early_stopping_min_delta: z.number().min(0).optional(),
    early_stopping_warmup_evals: z.number().int().min(0).nullable().optional(),
    // Accepted by the SDK; refused here with a reason rather than silently ignored.
    from_hf_model: z.string().optional(),
    hf_api_token: z.string().optional(),
    hf_model_revision: z.string().optional(),
    hf_output_repo_name: z.string().optional(),
    wandb_api_key: z.string().optional(),
    wandb_base_url: z.string().optional(),
    wandb_entity: z.string().optional(),
    wandb_name: z.string().optional(),
    wandb_project_name: z.string().optional(),
    gradient_accumulation_steps: z.number().int().min(0).optional(),
    train_vision: z.boolean().optional(),
  })
  .meta({
    id: 'CreateFineTuneRequest',
    // resolveModel (api/use-cases/fine-tunes-plan.ts) refuses a job with neither or both; a blank one is unset.
    oneOf: (['model', 'from_checkpoint'] as const).map((field) => ({
      required: [field],
      properties: { [field]: { type: 'string', minLength: 1 } },
    })),
  });

export type CreateFineTuneInput = z.output<typeof CreateFineTuneBody>;

export const FineTuneEventSchema = z.object({
  object: z.literal('fine-tune-event'),
  type: z.string(),
  level: z.enum(['info', 'warning', 'error']),
  message: z.string(),
  step: z.number().int().optional(),
  created_at: IsoDateTime,
});

export const FineTuneSchema = z
  .object({
    id: z.string(),
    status: z.enum(FINE_TUNE_STATUSES),
    user_id: z.string(),
    created_at: IsoDateTime,
    updated_at: IsoDateTime,
    started_at: IsoDateTime.optional(),
    model: z.string(),
    training_file: z.string(),
    validation_file: z.string().optional(),
    suffix: z.string().optional(),
    n_epochs: z.number().int(),
    n_checkpoints: z.number().int(),
    n_evals: z.number().int(),
    batch_size: z.number().int(),
    learning_rate: z.number(),
    lr_scheduler: z.object({
      lr_scheduler_type: z.enum(['linear', 'cosine']),
      lr_scheduler_args: z.object({ min_lr_ratio: z.number(), num_cycles: z.number().optional() }),
    }),
    warmup_ratio: z.number(),
    max_grad_norm: z.number(),
    weight_decay: z.number(),
    random_seed: z.number().int(),
    max_seq_length: z.number().int(),
    packing: z.boolean(),
    train_on_inputs: TrainOnInputs,
    training_method: z.union([
      z.object({ method: z.literal('sft'), train_on_inputs: TrainOnInputs }),
      z.object({
        method: z.literal('dpo'),
        dpo_beta: z.number(),
        dpo_normalize_logratios_by_length: z.boolean().optional(),
        dpo_reference_free: z.boolean().optional(),
        rpo_alpha: z.number().optional(),
        simpo_gamma: z.number().optional(),
      }),
    ]),
    training_type: z.union([
      z.object({ type: z.literal('Full') }),
      z.object({
        type: z.literal('Lora'),
        lora_r: z.number().int(),
        lora_alpha: z.number(),
        lora_dropout: z.number(),
        lora_trainable_modules: z.string(),
      }),
    ]),
    total_price: z.number().int().optional().describe('Charged so far, net of refunds, in nanodollars'),
    token_count: z.number().int().optional(),
    trainingfile_numlines: z.number().int().optional(),
    param_count: z.number().int().optional(),
    epochs_completed: z.number().int(),
    early_stopped: z.boolean(),
    early_stopping_best_step: z.number().int().optional(),
    early_stopping_best_metric: z.number().nullable().optional(),
    from_checkpoint: z.string().optional(),
    model_object_id: z.string().optional(),
    model_object_revision_id: z.string().optional(),
    model_object_name: z.string().optional(),
    adapter_object_id: z.string().optional(),
    adapter_object_revision_id: z.string().optional(),
    adapter_object_name: z.string().optional(),
    model_output_name: z.string(),
    model_output_path: z.string().optional(),
    error: z.string().optional(),
    events: z.array(FineTuneEventSchema).optional(),
  })
  .meta({ id: 'FineTune' });

export const FineTuneListSchema = listOf(FineTuneSchema);

/** A job's events: `{data}`, with no `object` field (unlike listOf). */
export const FineTuneEventListSchema = z.object({ data: z.array(FineTuneEventSchema) });

export const FineTuneCheckpointSchema = z.object({
  step: z.number().int(),
  checkpoint_type: z.string(),
  checkpoint: z.enum(['model', 'adapter']),
  path: z.string(),
  files: z.array(z.string()),
  created_at: IsoDateTime,
  object_id: z.string().optional(),
  object_revision_id: z.string().optional(),
  object_name: z.string().optional(),
});

export const FineTuneCheckpointListSchema = z.object({ data: z.array(FineTuneCheckpointSchema) });

export const ModelLimitsQuery = z.object({ model_name: z.string().min(1) });

/** A base model's fine-tuning limits (the SDK's FinetuneModelLimits). */
export const ModelLimitsSchema = z
  .object({
    model_name: z.string(),
    min_learning_rate: z.number(),
    max_learning_rate: z.number(),
    max_num_epochs: z.number().int(),
    max_num_checkpoints: z.number().int(),
    max_num_evals: z.number().int(),
    max_seq_length_sft: z.number().int(),
    max_seq_length_dpo: z.number().int(),
    min_max_seq_length: z.number().int(),
    default_gradient_accumulation_steps: z.number().int(),
    merge_output_lora: z.boolean(),
    supports_full_training: z.boolean(),
    supports_reasoning: z.boolean(),
    supports_tools: z.boolean(),
    supports_vision: z.boolean(),
    lora_training: z.object({
      min_batch_size: z.number().int(),
      max_batch_size: z.number().int(),
      max_batch_size_dpo: z.number().int(),
      max_rank: z.number().int(),
      default_rank: z.number().int(),
      target_modules: z.array(z.string()),
    }),
    full_training: z
      .object({
        min_batch_size: z.number().int(),
        max_batch_size: z.number().int(),
        max_batch_size_dpo: z.number().int(),
      })
      .optional(),
  })
  .meta({ id: 'FineTuneModelLimits' });

export const PreviewBody = z
  .object({
    model: z.string().min(1),
    training_file: z.string().min(1),
    top_k: z.number().int().min(1).max(50).default(5),
    train_on_inputs: z.boolean().optional(),
    training_method: z.literal('sft').default('sft'),
  })
  .meta({ id: 'FineTunePreviewRequest' });

const PreviewRow = z.object({
  row_index: z.number().int().describe('1-based line of the training file'),
  input_ids: z.array(z.number().int()),
  labels: z.array(z.number().int()).describe('input_ids where trained, -100 elsewhere'),
  num_tokens: z.number().int(),
  num_trained_tokens: z.number().int(),
  tokens: z.array(z.string()).describe('the first 32 tokens as strings'),
  trained_spans: z.array(z.array(z.number().int())).describe('half-open [start, end) ranges of trained positions'),
  truncated: z.boolean(),
});

export const PreviewResponse = z
  .object({
    model: z.string(),
    dataset_format: z.enum(['general', 'conversation', 'instruction']),
    max_seq_length: z.number().int(),
    train_on_inputs: z.boolean(),
    rows: z.array(PreviewRow),
  })
  .meta({ id: 'FineTunePreview' });

export const EstimateResponse = z
  .union([
    z.object({
      estimation_available: z.literal(true),
      allowed_to_proceed: z.boolean(),
      estimated_train_token_count: z.number().int(),
      estimated_eval_token_count: z.number().int(),
      estimated_total_price: z.number(),
      user_limit: z.number(),
    }),
    z.object({
      estimation_available: z.literal(false),
      unavailable_reason: z.enum([
        'multimodal_dataset',
        'train_file_not_validated',
        'eval_file_not_validated',
        'train_file_invalid',
        'eval_file_invalid',
      ]),
    }),
  ])
  .meta({ id: 'FineTuneEstimatePrice' });

const Timestamp = z
  .string()
  .refine((s) => !Number.isNaN(Date.parse(s)), 'an ISO-8601 timestamp')
  .meta({ pattern: TIMESTAMP_FORM });
/** The SDK's listMetrics filters: a step range, a time range, and how many rows to sample. */
export const FineTuneMetricsQuery = z.object({
  global_step_from: z.coerce.number().int().min(0).optional(),
  global_step_to: z.coerce.number().int().min(0).optional(),
  logged_at_from: Timestamp.optional(),
  logged_at_to: Timestamp.optional(),
  resolution: z.coerce.number().int().min(1).optional(),
});

/** One row per logged step: metric name to value. */
export const FineTuneMetricsSchema = z.object({ metrics: z.array(z.record(z.string(), z.number())) });

/** `n` rows spread evenly over `rows`, the first and the last included (all of them when there are no more than n). */

export const FineTuneDownloadQuery = z.object({
  // `<job_id>` for the final model, `<job_id>:<step>` for an intermediate checkpoint.
  ft_id: z.string().min(1).max(160),
  checkpoint: z.enum(['merged', 'adapter', 'model_output_path']).optional(),
  // The SDK: a final checkpoint's step downloads the final model; 0 or omitted, the final model too.
  checkpoint_step: z.coerce.number().int().min(0).optional(),
});

/** Where to fetch a job's tokenized dataset archive: a pre-signed URL. */
export const TokenizedDatasetUrlSchema = z.object({
  url: z.string(),
  filename: z.string(),
  content_type: z.string(),
  size: z.number().int(),
  expires_at: IsoDateTime,
});

export const DeleteFineTuneQuery = z.object({ force: QueryFlag.optional() });

export const FineTuneDeletedSchema = z.object({ message: z.string() });
