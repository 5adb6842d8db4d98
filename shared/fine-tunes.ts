/** Names and types shared by the fine-tuning API, workflow and activities. */
export const FINE_TUNE_STATUSES = [
  'pending',
  'queued',
  'running',
  'compressing',
  'uploading',
  'cancel_requested',
  'cancelled',
  'error',
  'completed',
] as const;
export type FineTuneStatus = (typeof FINE_TUNE_STATUSES)[number];

/** Statuses a job never leaves. */
export const FINISHED_FINE_TUNE_STATUSES: readonly FineTuneStatus[] = ['completed', 'cancelled', 'error'];

/** The SDK's FinetuneEventType values Gantry emits. */
export type FineTuneEventType =
  | 'job_pending'
  | 'job_start'
  | 'job_stopped'
  | 'job_restarted'
  | 'model_download_complete'
  | 'training_data_downloading'
  | 'training_data_download_complete'
  | 'validation_data_downloading'
  | 'validation_data_download_complete'
  | 'training_start'
  | 'checkpoint_save'
  | 'epoch_complete'
  | 'training_complete'
  | 'model_uploading'
  | 'model_upload_complete'
  | 'early_stopped'
  | 'job_complete'
  | 'job_error'
  | 'cancel_requested'
  | 'tokenized_dataset_upload_complete'
  | 'refund'
  | 'warning';

export const FINE_TUNE_RESOURCE_TYPE = 'fine-tune';

export function fineTuneWorkflowId(jobId: string): string {
  return `${FINE_TUNE_RESOURCE_TYPE}/${jobId}`;
}

/** Blob keys of a job's outputs. */
export const tokenizedDatasetArchiveKey = (jobId: string) => `fine-tunes/${jobId}/tokenized-dataset.tar.zst`;
export const finalOutputPrefix = (jobId: string) => `fine-tunes/${jobId}/final`;
/** A download's archive, once made; `variant` tells the downloads of one job apart. */
export const fineTuneDownloadKey = (jobId: string, variant: string) =>
  `fine-tunes/${jobId}/downloads/${variant}.tar.zst`;
export const checkpointDownloadVariant = (step: number) => `checkpoint-${step}`;
/** The final model's downloads: the `checkpoint` values of /finetune/download. */
export const FINAL_DOWNLOAD_VARIANTS = ['merged', 'adapter', 'model_output_path'];

/** Every hyperparameter of a job, resolved (defaults applied) at create. */
export interface TrainingPlan {
  model: string;
  training_file: string;
  validation_file: string | null;
  n_epochs: number;
  n_checkpoints: number;
  n_evals: number;
  batch_size: number;
  learning_rate: number;
  lr_scheduler: { type: 'linear' | 'cosine'; min_lr_ratio: number; num_cycles: number };
  warmup_ratio: number;
  max_grad_norm: number;
  weight_decay: number;
  seed: number;
  max_seq_length: number;
  packing: boolean;
  train_on_inputs: boolean | 'auto';
  method: 'sft' | 'dpo';
  dpo_beta: number;
  /** DPO variants (the spec's training_method options); absent on jobs planned before they were offered. */
  dpo_normalize_logratios_by_length?: boolean;
  dpo_reference_free?: boolean;
  rpo_alpha?: number | null;
  simpo_gamma?: number | null;
  training_type: 'lora' | 'full';
  lora: { r: number; alpha: number; dropout: number; target_modules: string[] } | null;
  early_stopping: { enabled: boolean; patience: number; min_delta: number; warmup_evals: number };
  suffix: string | null;
  /** from_checkpoint as the user gave it, and the weights file the run starts from (absent on older jobs). */
  from_checkpoint?: string | null;
  init_from?: { blob_prefix: string; file: string } | null;
}

export interface FineTuneWorkflowInput {
  jobId: string;
  projectId: string;
  gpuType: string;
  /** How long the first wait for a GPU worker lasts before the job says it is still queued. */
  queueProbeSeconds: number;
  /** Later waits double up to this (absent: 900 s). */
  maxQueueProbeSeconds?: number;
  /** Waits of one queued run before it continues as new (absent: 50). */
  probesPerRun?: number;
  heartbeatTimeoutSeconds: number;
  /** Set when the run continues as new while queued: the tokenized data, and how many waits it has had. */
  queued?: { prepared: PreparedData; waits: number };
}

/** How far training got: what a retry, or a new attempt budget, resumes from. */
export interface TrainingProgress {
  step: number;
  /** The newest checkpoint, as stored in the blob store (a retry on another host starts from it). */
  checkpoint?: { step: number; blobPrefix: string; files: string[] };
}

/** Where the tokenization activity left the trainer's inputs. */
export interface PreparedData {
  trainKey: string;
  evalKey: string | null;
  trainRows: number;
  tokenCount: number;
}

export interface TrainingOutcome {
  steps: number;
  paramCount: number;
  finalKeys: string[];
  earlyStopped: boolean;
  bestStep: number | null;
  bestMetric: number | null;
}
