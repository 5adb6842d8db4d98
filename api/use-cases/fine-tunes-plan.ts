/**
 * The create rules of a fine-tuning job (spec: fine-tuning job parameters),
 * each a 400 naming the parameter, and the defaults that turn a request into
 * a complete TrainingPlan.
 */
import { randomInt } from 'node:crypto';
import type { TrainingPlan } from '../../shared/fine-tunes';
import type Decimal from 'decimal.js';
import type { DatasetFormat } from '../../datasets/records';
import { remainingCredit } from '../../db/credit';
import type { FileRow } from '../../db/files';
import { ESTIMATE_SCAN_BYTES, priceFineTuneJob, type JobPrice } from '../../fine-tunes/estimate';
import type { ApiDeps } from '../deps';
import { FINE_TUNE_MODELS, findFineTuneModel, type FineTuneModel } from '../../fine-tunes/models';
import { badRequest } from '../errors';
import type { CreateFineTuneInput } from '../schemas/fine-tunes';

const UNSUPPORTED = [
  ['from_hf_model', 'Starting from a model hub repository is not available on this installation.'],
  ['hf_output_repo_name', 'Uploading to a model hub is not available on this installation.'],
  ['hf_api_token', 'Model hub access is not available on this installation.'],
  ['hf_model_revision', 'Model hub access is not available on this installation.'],
  ['wandb_api_key', 'Experiment tracker integration is not available on this installation.'],
  ['wandb_base_url', 'Experiment tracker integration is not available on this installation.'],
  ['wandb_entity', 'Experiment tracker integration is not available on this installation.'],
  ['wandb_name', 'Experiment tracker integration is not available on this installation.'],
  ['wandb_project_name', 'Experiment tracker integration is not available on this installation.'],
] as const;

/** The checkpoint a from_checkpoint job starts from (fine-tunes-checkpoint-source.ts resolves it). */
export interface CheckpointSource {
  spec: string;
  plan: TrainingPlan;
  init: { blob_prefix: string; file: string };
}

export function resolveModel(body: CreateFineTuneInput, source?: CheckpointSource): FineTuneModel {
  if (body.from_checkpoint !== undefined && body.model !== undefined) {
    throw badRequest("Set either 'model' or 'from_checkpoint', not both.", 'from_checkpoint');
  }
  if (source) {
    const model = findFineTuneModel(source.plan.model);
    if (!model)
      throw badRequest(`The checkpoint's base model ${source.plan.model} is no longer offered.`, 'from_checkpoint');
    return model;
  }
  if (!body.model) throw badRequest("Missing required field 'model' (or 'from_checkpoint').", 'model');
  const model = findFineTuneModel(body.model);
  if (!model) {
    throw badRequest(
      `Unknown base model '${body.model}'. Models that can be fine-tuned here: ${FINE_TUNE_MODELS.map((m) => m.name).join(', ')}.`,
      'model',
      'model_not_available',
    );
  }
  return model;
}

/** The file must be this project's, for fine-tuning, and validated as good. */
export function checkFile(file: FileRow | null, id: string, param: string): FileRow {
  if (!file) throw badRequest(`File '${id}' not found.`, param, 'file_not_found');
  if (file.purpose !== 'fine-tune') {
    throw badRequest(`File '${id}' was uploaded for '${file.purpose}', not 'fine-tune'.`, param);
  }
  if (file.processing_status === 'INVALID_FORMAT' || file.validation_report?.valid === false) {
    throw badRequest(
      `File '${id}' failed validation: ${file.validation_report?.error ?? 'invalid format'}`,
      param,
      'file_invalid',
    );
  }
  if (file.processing_status !== 'COMPLETED' || !file.validation_report) {
    throw badRequest(
      `File '${id}' is not validated yet (processing_status ${file.processing_status}); retry once it is COMPLETED.`,
      param,
      'file_not_ready',
    );
  }
  return file;
}

/** The DPO variants a job asks for (both trainers compute them; see trainers/reference/gantry_trainer/losses.py). */
function dpoVariants(body: CreateFineTuneInput): Partial<TrainingPlan> {
  const m = body.training_method;
  if (m?.method !== 'dpo') return {};
  return {
    dpo_normalize_logratios_by_length: m.dpo_normalize_logratios_by_length ?? false,
    dpo_reference_free: m.dpo_reference_free ?? false,
    rpo_alpha: m.rpo_alpha ?? null,
    simpo_gamma: m.simpo_gamma ?? null,
  };
}

export function resolvePlan(
  body: CreateFineTuneInput,
  model: FineTuneModel,
  training: FileRow,
  validation: FileRow | null,
  source?: CheckpointSource,
): TrainingPlan {
  for (const [field, message] of UNSUPPORTED) {
    if (body[field] !== undefined) throw badRequest(message, field, 'not_supported');
  }
  const limits = model.limits;
  if (body.train_vision && !limits.supports_vision) {
    throw badRequest(`${model.name} has no vision encoder to train.`, 'train_vision', 'not_supported');
  }
  // Said rather than dropped: each optimizer step here is one batch of batch_size examples.
  const accumulation = body.gradient_accumulation_steps;
  if (accumulation !== undefined && accumulation > limits.default_gradient_accumulation_steps) {
    throw badRequest(
      `${model.name}'s trainer takes one batch per step (gradient_accumulation_steps ${limits.default_gradient_accumulation_steps}); raise batch_size for a larger effective batch.`,
      'gradient_accumulation_steps',
      'not_supported',
    );
  }
  const method = body.training_method?.method ?? 'sft';
  const isPreference = training.validation_report?.dataset_format === 'PREFERENCE_OPENAI';
  if (method === 'dpo' && !isPreference) {
    throw badRequest(
      'DPO needs a preference dataset (input, preferred_output, non_preferred_output).',
      'training_method.method',
    );
  }
  if (method === 'sft' && isPreference) {
    throw badRequest("This is a preference dataset: set training_method to {method: 'dpo'}.", 'training_method.method');
  }

  if (source)
    return inheritFromCheckpoint(
      resolvePlan({ ...body, training_type: undefined }, model, training, validation),
      body,
      source,
    );
  const kind = body.training_type?.type === 'Full' ? 'full' : 'lora';
  if (kind === 'full' && !limits.supports_full_training) {
    throw badRequest(`${model.name} supports LoRA fine-tuning only.`, 'training_type.type');
  }
  let lora: TrainingPlan['lora'] = null;
  if (kind === 'lora') {
    const t = body.training_type?.type === 'Lora' ? body.training_type : undefined;
    const r = t?.lora_r ?? limits.lora_training.default_rank;
    if (r > limits.lora_training.max_rank) {
      throw badRequest(
        `lora_r may be at most ${limits.lora_training.max_rank} for ${model.name}.`,
        'training_type.lora_r',
      );
    }
    const requested = (t?.lora_trainable_modules ?? 'all-linear')
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    const modules = requested.includes('all-linear') ? limits.lora_training.target_modules : requested;
    const unknown = modules.filter((m) => !limits.lora_training.target_modules.includes(m));
    if (unknown.length) {
      throw badRequest(
        `Unknown LoRA module '${unknown[0]}'; ${model.name} has ${limits.lora_training.target_modules.join(', ')} (or all-linear).`,
        'training_type.lora_trainable_modules',
      );
    }
    lora = { r, alpha: t?.lora_alpha ?? 8, dropout: t?.lora_dropout ?? 0, target_modules: modules };
  }

  const n_epochs = body.n_epochs ?? 1;
  if (n_epochs > limits.max_num_epochs)
    throw badRequest(`n_epochs may be at most ${limits.max_num_epochs}.`, 'n_epochs');
  const n_checkpoints = body.n_checkpoints ?? 1;
  if (n_checkpoints > n_epochs) throw badRequest('n_checkpoints may not exceed n_epochs.', 'n_checkpoints');
  const n_evals = body.n_evals ?? 0;
  if (n_evals > limits.max_num_evals) throw badRequest(`n_evals may be at most ${limits.max_num_evals}.`, 'n_evals');
  if (n_evals > 0 && !validation)
    throw badRequest('A validation_file is required when n_evals > 0.', 'validation_file');

  const learning_rate = body.learning_rate ?? 0.00001;
  if (learning_rate < limits.min_learning_rate || learning_rate > limits.max_learning_rate) {
    throw badRequest(
      `learning_rate must be between ${limits.min_learning_rate} and ${limits.max_learning_rate}.`,
      'learning_rate',
    );
  }

  const bounds = kind === 'full' ? limits.full_training! : limits.lora_training;
  const maxBatch = method === 'dpo' ? bounds.max_batch_size_dpo : bounds.max_batch_size;
  const batch_size = body.batch_size === undefined || body.batch_size === 'max' ? maxBatch : body.batch_size;
  if (batch_size < bounds.min_batch_size || batch_size > maxBatch) {
    throw badRequest(`batch_size must be between ${bounds.min_batch_size} and ${maxBatch} (or 'max').`, 'batch_size');
  }

  const packing = body.packing ?? true;
  const maxLen = method === 'dpo' ? limits.max_seq_length_dpo : limits.max_seq_length_sft;
  if (!packing && body.max_seq_length === undefined) {
    throw badRequest('max_seq_length is required when packing is off.', 'max_seq_length');
  }
  const max_seq_length = body.max_seq_length ?? maxLen;
  if (max_seq_length < limits.min_max_seq_length || max_seq_length > maxLen) {
    throw badRequest(`max_seq_length must be between ${limits.min_max_seq_length} and ${maxLen}.`, 'max_seq_length');
  }

  const early = {
    enabled: body.early_stopping_enabled ?? false,
    patience: body.early_stopping_patience ?? 2,
    min_delta: body.early_stopping_min_delta ?? 0,
    // Both official clients document the server's default as 1 (the first evaluation sets the baseline).
    warmup_evals: body.early_stopping_warmup_evals ?? 1,
  };
  if (early.enabled) {
    if (!validation) throw badRequest('Early stopping needs a validation_file.', 'early_stopping_enabled');
    const needed = early.patience + early.warmup_evals + 1;
    if (n_evals < needed) {
      throw badRequest(
        `Early stopping needs n_evals >= early_stopping_patience + early_stopping_warmup_evals + 1 = ${needed}.`,
        'n_evals',
      );
    }
  }

  const trainOnInputs =
    (body.training_method?.method === 'sft' ? body.training_method.train_on_inputs : undefined) ??
    body.train_on_inputs ??
    'auto';
  return {
    model: model.name,
    training_file: training.id,
    validation_file: validation?.id ?? null,
    n_epochs,
    n_checkpoints,
    n_evals,
    batch_size,
    learning_rate,
    lr_scheduler: {
      type: body.lr_scheduler?.lr_scheduler_type ?? 'cosine',
      min_lr_ratio: body.lr_scheduler?.lr_scheduler_args?.min_lr_ratio ?? 0,
      num_cycles: body.lr_scheduler?.lr_scheduler_args?.num_cycles ?? 0.5,
    },
    warmup_ratio: body.warmup_ratio ?? 0,
    max_grad_norm: body.max_grad_norm ?? 1,
    weight_decay: body.weight_decay ?? 0,
    // Chosen now and kept, so the job can be reproduced.
    seed: body.random_seed ?? randomInt(0, 2 ** 31 - 1),
    max_seq_length,
    packing,
    train_on_inputs: trainOnInputs,
    method,
    dpo_beta: body.training_method?.method === 'dpo' ? (body.training_method.dpo_beta ?? 0.1) : 0.1,
    ...dpoVariants(body),
    training_type: kind,
    lora,
    early_stopping: early,
    suffix: body.suffix ?? null,
  };
}

/**
 * A job started from a checkpoint inherits the training type (and the LoRA
 * shape, since it continues the same adapter); asking for another is a 400.
 * The batch-size bounds are checked again for the inherited type.
 */
function inheritFromCheckpoint(plan: TrainingPlan, body: CreateFineTuneInput, source: CheckpointSource): TrainingPlan {
  const inherited = source.plan.training_type;
  const asked = body.training_type?.type;
  if (asked && (asked === 'Full' ? 'full' : 'lora') !== inherited) {
    throw badRequest(
      `A job from a checkpoint keeps the checkpoint's training type (${inherited === 'full' ? 'Full' : 'Lora'}).`,
      'training_type.type',
    );
  }
  if (
    body.training_type?.type === 'Lora' &&
    body.training_type.lora_r !== undefined &&
    body.training_type.lora_r !== source.plan.lora?.r
  ) {
    throw badRequest(
      `The checkpoint's adapter has rank ${source.plan.lora?.r}; a job continuing it keeps that rank.`,
      'training_type.lora_r',
    );
  }
  const model = findFineTuneModel(plan.model)!;
  const bounds = inherited === 'full' ? model.limits.full_training! : model.limits.lora_training;
  const maxBatch = plan.method === 'dpo' ? bounds.max_batch_size_dpo : bounds.max_batch_size;
  const batch_size = body.batch_size === undefined || body.batch_size === 'max' ? maxBatch : plan.batch_size;
  if (batch_size < bounds.min_batch_size || batch_size > maxBatch) {
    throw badRequest(`batch_size must be between ${bounds.min_batch_size} and ${maxBatch} (or 'max').`, 'batch_size');
  }
  return {
    ...plan,
    batch_size,
    training_type: inherited,
    lora: source.plan.lora,
    from_checkpoint: source.spec,
    init_from: source.init,
  };
}

/**
 * The quote of a job: its files counted over their first ESTIMATE_SCAN_BYTES each (bounded work in
 * the request) and priced, beside the organization's remaining credit. The charge at training start
 * is exact and checked against the credit again.
 */
export async function quoteFineTune(
  deps: Pick<ApiDeps, 'db' | 'blobs'>,
  projectId: string,
  files: { train: FileRow; eval: FileRow | null },
  plan: TrainingPlan,
  model: FineTuneModel,
): Promise<{ price: JobPrice; credit: Decimal }> {
  const priced = (f: FileRow) => ({
    read: () => deps.blobs.read(f.blob_key),
    bytes: Number(f.bytes),
    format: f.validation_report!.dataset_format as DatasetFormat,
  });
  const price = await priceFineTuneJob(
    priced(files.train),
    files.eval ? priced(files.eval) : null,
    plan,
    model,
    ESTIMATE_SCAN_BYTES,
  );
  return { price, credit: await remainingCredit(deps.db, projectId) };
}
