/**
 * How a fine-tuning job and what it made are shown: the job as the SDKs read it, its events, its
 * checkpoints with their registry names, and its metrics by step. Routes call these and nothing
 * else decides a fine-tune's shape.
 */
import Decimal from 'decimal.js';
import type { FineTuneEventRow, FineTuneRow, listCheckpoints, listMetrics } from '../../db/fine-tunes';
import { qualifiedModelName } from '../../db/models';

type CheckpointRow = Awaited<ReturnType<typeof listCheckpoints>>[number];
type MetricRow = Awaited<ReturnType<typeof listMetrics>>[number];

function sampleUniformly<T>(rows: T[], n: number | undefined): T[] {
  if (n === undefined || rows.length <= n) return rows;
  if (n === 1) return [rows[rows.length - 1]];
  return Array.from({ length: n }, (_, i) => rows[Math.round((i * (rows.length - 1)) / (n - 1))]);
}

export function toEvent(e: FineTuneEventRow) {
  return {
    object: 'fine-tune-event' as const,
    type: e.type,
    level: e.level,
    message: e.message,
    ...(e.step !== null ? { step: e.step } : {}),
    created_at: new Date(e.created_at).toISOString(),
  };
}

/** Metric rows' names for the recorded columns. */
const METRIC_NAMES = [
  ['train/epoch', 'epoch'],
  ['train/loss', 'loss'],
  ['train/learning_rate', 'learning_rate'],
  ['train/grad_norm', 'grad_norm'],
  ['train/tokens', 'tokens'],
  ['train/reward_margin', 'reward_margin'],
  ['eval/loss', 'eval_loss'],
] as const;

const nanodollars = (usd: string) => new Decimal(usd).mul(1e9).round().toNumber();

/** The job as the SDK reads it; `names` (resolved registry names) only on retrieve, per the spec. */
export function toFineTune(
  row: FineTuneRow,
  events?: FineTuneEventRow[],
  names?: { model_object_name: string; adapter_object_name?: string },
) {
  const p = row.plan;
  return {
    id: row.id,
    status: row.status,
    user_id: row.created_by,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
    ...(row.started_at ? { started_at: new Date(row.started_at).toISOString() } : {}),
    model: p.model,
    training_file: p.training_file,
    ...(p.validation_file ? { validation_file: p.validation_file } : {}),
    ...(p.suffix ? { suffix: p.suffix } : {}),
    n_epochs: p.n_epochs,
    n_checkpoints: p.n_checkpoints,
    n_evals: p.n_evals,
    batch_size: p.batch_size,
    learning_rate: p.learning_rate,
    lr_scheduler: {
      lr_scheduler_type: p.lr_scheduler.type,
      lr_scheduler_args: { min_lr_ratio: p.lr_scheduler.min_lr_ratio, num_cycles: p.lr_scheduler.num_cycles },
    },
    warmup_ratio: p.warmup_ratio,
    max_grad_norm: p.max_grad_norm,
    weight_decay: p.weight_decay,
    random_seed: p.seed,
    max_seq_length: p.max_seq_length,
    packing: p.packing,
    train_on_inputs: p.train_on_inputs,
    training_method:
      p.method === 'dpo'
        ? {
            method: 'dpo' as const,
            dpo_beta: p.dpo_beta,
            ...(p.dpo_normalize_logratios_by_length !== undefined
              ? { dpo_normalize_logratios_by_length: p.dpo_normalize_logratios_by_length }
              : {}),
            ...(p.dpo_reference_free !== undefined ? { dpo_reference_free: p.dpo_reference_free } : {}),
            ...(typeof p.rpo_alpha === 'number' ? { rpo_alpha: p.rpo_alpha } : {}),
            ...(typeof p.simpo_gamma === 'number' ? { simpo_gamma: p.simpo_gamma } : {}),
          }
        : { method: 'sft' as const, train_on_inputs: p.train_on_inputs },
    training_type: p.lora
      ? {
          type: 'Lora' as const,
          lora_r: p.lora.r,
          lora_alpha: p.lora.alpha,
          lora_dropout: p.lora.dropout,
          lora_trainable_modules: p.lora.target_modules.join(','),
        }
      : { type: 'Full' as const },
    // Nanodollars, as the SDKs read it: charged when training starts, less any refund.
    ...(row.charged !== undefined ? { total_price: nanodollars(row.charged) } : {}),
    ...(row.token_count !== null ? { token_count: Number(row.token_count) } : {}),
    ...(row.trainingfile_numlines !== null ? { trainingfile_numlines: row.trainingfile_numlines } : {}),
    ...(row.param_count !== null ? { param_count: Number(row.param_count) } : {}),
    epochs_completed: row.epochs_completed,
    early_stopped: row.early_stopped,
    ...(row.early_stopping_best_step !== null ? { early_stopping_best_step: row.early_stopping_best_step } : {}),
    ...(row.early_stopping_best_step !== null ? { early_stopping_best_metric: row.early_stopping_best_metric } : {}),
    model_output_name: row.model_output_name,
    ...(p.from_checkpoint ? { from_checkpoint: p.from_checkpoint } : {}),
    ...(row.model_object_id ? { model_object_id: row.model_object_id } : {}),
    ...(row.model_object_revision_id ? { model_object_revision_id: row.model_object_revision_id } : {}),
    ...(row.adapter_object_id ? { adapter_object_id: row.adapter_object_id } : {}),
    ...(row.adapter_object_revision_id ? { adapter_object_revision_id: row.adapter_object_revision_id } : {}),
    ...names,
    ...(row.output_prefix && row.status === 'completed' ? { model_output_path: row.output_prefix } : {}),
    ...(row.error ? { error: row.error } : {}),
    ...(events ? { events: events.map(toEvent) } : {}),
  };
}

/**
 * A job's checkpoints as the SDK lists them: an intermediate one as the adapter (LoRA) or model it
 * saved, the final one as the merged model and, for LoRA, the adapter too.
 */
export function toCheckpoints(
  row: FineTuneRow,
  checkpoints: CheckpointRow[],
  names: { model_object_name: string; adapter_object_name?: string },
) {
  const lora = row.plan.training_type === 'lora';
  const registered = (id: string | null, revision: string | null, name: string | undefined) =>
    id && revision && name ? { object_id: id, object_revision_id: revision, object_name: name } : {};
  const data = [];
  for (const c of checkpoints) {
    const base = {
      step: c.step,
      checkpoint_type: c.checkpoint_type,
      files: c.files,
      created_at: new Date(c.created_at).toISOString(),
    };
    if (c.checkpoint_type === 'intermediate') {
      const name =
        c.object_id && c.registry_name !== null
          ? qualifiedModelName({ id: c.object_id, name: c.registry_name, project_slug: c.registry_project_slug })
          : undefined;
      data.push({
        ...base,
        checkpoint: lora ? ('adapter' as const) : ('model' as const),
        path: `${row.id}:${c.step}`,
        ...registered(c.object_id, c.object_revision_id, name),
      });
      continue;
    }
    // The final checkpoint reuses the job-level registry ids: the merged model, and for LoRA the adapter.
    data.push({
      ...base,
      checkpoint: 'model' as const,
      path: row.id,
      ...registered(row.model_object_id, row.model_object_revision_id, names.model_object_name),
    });
    if (lora) {
      data.push({
        ...base,
        checkpoint: 'adapter' as const,
        path: row.id,
        ...registered(row.adapter_object_id, row.adapter_object_revision_id, names.adapter_object_name),
      });
    }
  }
  return data;
}

/**
 * At most `resolution` of a job's metric rows, spread evenly, one object per logged step, every value
 * a number as both SDKs type it, under the names experiment trackers use (the Python CLI plots by
 * `train/global_step`); `timestamp` is when the step was logged, in Unix seconds.
 */
export function toMetrics(metrics: MetricRow[], resolution: number | undefined) {
  return sampleUniformly(metrics, resolution).map((m) => {
    const out: Record<string, number> = {
      'train/global_step': m.step,
      timestamp: new Date(m.logged_at).getTime() / 1000,
    };
    for (const [name, k] of METRIC_NAMES) if (m[k] !== null) out[name] = m[k];
    return out;
  });
}
