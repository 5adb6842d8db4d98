/**
 * Activities of the fineTune workflow.
 *
 * Control queue: job records and events, tokenization of the job's files into
 * the trainer's rows (stored in the blob store), file leases.
 * GPU queue (gpu.<type> of the base model): the training run itself.
 */
import { createReadStream, createWriteStream, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ApplicationFailure, CancelledFailure, Context } from '@temporalio/activity';
import {
  finalOutputPrefix,
  fineTuneWorkflowId,
  tokenizedDatasetArchiveKey,
  type FineTuneEventType,
  type PreparedData,
  type TrainingProgress,
  type TrainingOutcome,
} from '../shared/fine-tunes';
import type { DatasetFormat } from '../datasets/records';
import { getFileById, releaseFileLease } from '../db/files';
import {
  addFineTuneEvent,
  getFineTuneById,
  recordCheckpoint,
  recordMetrics,
  type StepMetric,
  setTokenizedCounts,
  updateFineTune,
  type FineTuneUpdate,
} from '../db/fine-tunes';
import type { TokenizedCounts } from '../fine-tunes/estimate';
import { withTransaction, type Db } from '../db/pool';
import { chargeFineTune, refundFineTune } from './fine-tune-billing';
import { findFineTuneModel } from '../fine-tunes/models';
import { tokenizeStoredFile } from '../fine-tunes/tokenize-file';
import { trainerConfig } from '../fine-tunes/trainer-config';
import type { BlobStore } from '../providers/storage/blob-store';
import { runTrainer, type Trainers } from '../providers/trainer/process-trainer';
import type { TrainingSlots } from '../providers/accelerator/training-slots';
import { tarZstStream, type ArchiveEntry } from '../providers/archive/tar-zst';
import { TrainingSideWork } from './training-side-work';

const FOREIGN_KEY_VIOLATION = '23503';

export interface JobRecord {
  jobId: string;
  update?: FineTuneUpdate;
  event?: {
    type: FineTuneEventType;
    message: string;
    level?: 'info' | 'warning' | 'error';
    step?: number;
    dedupKey?: string;
  };
}

async function recordJob(db: Db, r: JobRecord): Promise<void> {
  try {
    // In one transaction: whoever reads a job's new status reads the event that says why (a
    // reader between the two writes saw a job cancelled without its job_stopped event).
    await withTransaction(db, async (tx) => {
      if (r.update) await updateFineTune(tx, r.jobId, r.update);
      if (r.event) await addFineTuneEvent(tx, { jobId: r.jobId, ...r.event });
    });
  } catch (err) {
    // The job was deleted (force=true) while this activity ran: retrying cannot bring it back.
    if ((err as { code?: string }).code === FOREIGN_KEY_VIOLATION) {
      throw ApplicationFailure.nonRetryable(`fine-tune ${r.jobId} no longer exists`, 'JobGone');
    }
    throw err;
  }
}

export function createFineTuneActivities({ db, blobs }: { db: Db; blobs: BlobStore }) {
  return {
    async recordFineTune(r: JobRecord): Promise<void> {
      // Billing follows the job's status: charged when training starts, unused tokens refunded before the
      // end is recorded (whoever sees the final status sees the refund too).
      // A job the organization's credit does not cover fails here, before it is recorded as running.
      const status = r.update?.status;
      if (status === 'completed' || status === 'cancelled' || status === 'error') await refundFineTune(db, r.jobId);
      if (status === 'running') await chargeFineTune(db, blobs, r.jobId);
      await recordJob(db, r);
    },

    async releaseFineTuneFiles({ jobId }: { jobId: string }): Promise<void> {
      const job = await getFineTuneById(db, jobId);
      if (!job) return;
      for (const fileId of [job.plan.training_file, job.plan.validation_file]) {
        if (fileId) await releaseFileLease(db, fileId, fineTuneWorkflowId(jobId));
      }
    },

    /** Packs the tokenized rows into one .tar.zst users can download. */
    async archiveTokenizedDataset({ jobId, prepared }: { jobId: string; prepared: PreparedData }): Promise<string> {
      const key = tokenizedDatasetArchiveKey(jobId);
      const entries: ArchiveEntry[] = [];
      for (const [name, blobKey] of [
        ['train.jsonl', prepared.trainKey],
        ['validation.jsonl', prepared.evalKey],
      ] as const) {
        if (!blobKey) continue;
        const size = await blobs.size(blobKey);
        if (size === null)
          throw ApplicationFailure.nonRetryable(`tokenized data ${blobKey} is missing`, 'TokenizedDataMissing');
        entries.push({ name, size, open: () => blobs.read(blobKey) });
      }
      // Heartbeats follow the bytes written: a large dataset archives for longer than the heartbeat
      // timeout, and a stuck archive stops them.
      const ctx = Context.current();
      const packed = tarZstStream(entries);
      const withProgress = Readable.from(
        (async function* () {
          let bytes = 0;
          for await (const chunk of packed) {
            bytes += (chunk as Buffer).length;
            ctx.heartbeat({ bytes });
            yield chunk as Buffer;
          }
        })(),
      );
      await blobs.put(key, withProgress, { maxBytes: Number.MAX_SAFE_INTEGER });
      await recordJob(db, {
        jobId,
        event: {
          type: 'tokenized_dataset_upload_complete',
          message:
            `Tokenized dataset uploaded. Download it with: curl -H "Authorization: Bearer $API_KEY" ` +
            `<api>/v1/fine-tunes/${jobId}/download-tokenized-dataset (then fetch the url it returns).`,
          dedupKey: 'tokenized-dataset',
        },
      });
      return key;
    },

    /** Tokenizes the training (and validation) file into the trainer's rows, stored as blobs. */
    async prepareTrainingData({ jobId }: { jobId: string }): Promise<PreparedData> {
      const ctx = Context.current();
      const job = await getFineTuneById(db, jobId);
      if (!job) throw ApplicationFailure.nonRetryable(`fine-tune ${jobId} no longer exists`, 'JobGone');
      const model = findFineTuneModel(job.plan.model);
      if (!model) throw ApplicationFailure.nonRetryable(`unknown base model ${job.plan.model}`, 'UnknownModel');
      const tokenizer = model.tokenizer();

      const tokenizeFile = async (fileId: string, purpose: 'train' | 'eval') => {
        const file = await getFileById(db, fileId);
        if (!file || !file.validation_report?.valid) {
          throw ApplicationFailure.nonRetryable(`file ${fileId} is gone or not valid`, 'FileUnusable');
        }
        const key = `fine-tunes/${jobId}/tokenized/${purpose}.jsonl`;
        const counts = await tokenizeStoredFile(blobs, file.blob_key, key, {
          tokenizer,
          format: file.validation_report.dataset_format as DatasetFormat,
          method: job.plan.method,
          maxSeqLength: job.plan.max_seq_length,
          trainOnInputs: job.plan.train_on_inputs,
          // Evaluation rows are never packed: each eval sample stands alone.
          packing: purpose === 'train' && job.plan.packing,
          onChunk: (samples) => ctx.heartbeat({ purpose, samples }),
        });
        return { key, ...counts };
      };

      await recordJob(db, {
        jobId,
        event: {
          type: 'training_data_downloading',
          message: 'Tokenizing the training data.',
          dedupKey: 'tokenize-train',
        },
      });
      const train = await tokenizeFile(job.plan.training_file, 'train');
      let evalKey: string | null = null;
      let evalCounts: TokenizedCounts | null = null;
      if (job.plan.validation_file) {
        await recordJob(db, {
          jobId,
          event: {
            type: 'validation_data_downloading',
            message: 'Tokenizing the validation data.',
            dedupKey: 'tokenize-eval',
          },
        });
        const evaluated = await tokenizeFile(job.plan.validation_file, 'eval');
        evalKey = evaluated.key;
        evalCounts = { samples: evaluated.samples, tokens: evaluated.tokens };
        await recordJob(db, {
          jobId,
          event: {
            type: 'validation_data_download_complete',
            message: 'Validation data tokenized.',
            dedupKey: 'tokenized-eval',
          },
        });
      }
      // The charge at training start is computed from these counts, exactly.
      await setTokenizedCounts(db, jobId, {
        train: { samples: train.samples, tokens: train.tokens },
        eval: evalCounts,
      });
      await recordJob(db, {
        jobId,
        update: { token_count: train.tokens, trainingfile_numlines: train.samples },
        event: {
          type: 'training_data_download_complete',
          message: `Training data tokenized: ${train.samples} samples, ${train.rows} rows, ${train.tokens} tokens.`,
          dedupKey: 'tokenized-train',
        },
      });
      return { trainKey: train.key, evalKey, trainRows: train.rows, tokenCount: train.tokens };
    },
  };
}

async function download(blobs: BlobStore, key: string, file: string): Promise<void> {
  mkdirSync(path.dirname(file), { recursive: true });
  await pipeline(blobs.read(key), createWriteStream(file));
}

async function uploadDir(blobs: BlobStore, dir: string, prefix: string): Promise<string[]> {
  const files = readdirSync(dir).filter((f) => !f.startsWith('.'));
  for (const f of files) {
    await blobs.put(`${prefix}/${f}`, createReadStream(path.join(dir, f)), { maxBytes: Number.MAX_SAFE_INTEGER });
  }
  return files;
}

export function createTrainingActivities(deps: {
  db: Db;
  blobs: BlobStore;
  trainers: Trainers;
  /** The host's model directory: base weights of the torch trainer's models (config `modelDir`). */
  modelDir: string;
  workDir: string;
  /** A trainer silent this long is hung: it is killed and the attempt fails (retried from the last checkpoint). */
  stallSeconds: number;
  /** The trainers this host may run at once. */
  slots: TrainingSlots;
}) {
  const { db, blobs } = deps;
  /** One training attempt on a slot of this host. */
  async function train(
    ctx: Context,
    { jobId, prepared, resume }: { jobId: string; prepared: PreparedData; resume?: TrainingProgress },
  ): Promise<TrainingOutcome> {
    const job = await getFineTuneById(db, jobId);
    if (!job) throw ApplicationFailure.nonRetryable(`fine-tune ${jobId} no longer exists`, 'JobGone');
    const model = findFineTuneModel(job.plan.model)!;
    const python = deps.trainers[model.trainer.kind];
    if (!python) {
      // Retrying elsewhere would not help either: the queue's workers share a configuration.
      throw ApplicationFailure.nonRetryable(
        `${model.name} needs the ${model.trainer.kind} trainer, which this GPU worker does not have ` +
          `(it has: ${Object.keys(deps.trainers).join(', ')}). Install trainers/${model.trainer.kind} on the ` +
          `GPU hosts and set GANTRY_TORCH_TRAINER_PYTHON.`,
        'TrainerUnavailable',
      );
    }
    const run = path.join(deps.workDir, jobId, `attempt-${ctx.info.attempt}`);
    rmSync(run, { recursive: true, force: true });
    const trainFile = path.join(run, 'train.jsonl');
    await download(blobs, prepared.trainKey, trainFile);
    const validationFile = prepared.evalKey ? path.join(run, 'eval.jsonl') : null;
    if (prepared.evalKey && validationFile) await download(blobs, prepared.evalKey, validationFile);

    // from_checkpoint: the weights this run starts from.
    let initFrom: string | undefined;
    if (job.plan.init_from) {
      initFrom = path.join(run, 'init');
      const { blob_prefix, file } = job.plan.init_from;
      if ((await blobs.size(`${blob_prefix}/${file}`)) === null) {
        throw ApplicationFailure.nonRetryable(
          `the checkpoint ${job.plan.from_checkpoint} no longer exists (its job or registry model was deleted)`,
          'CheckpointGone',
        );
      }
      await download(blobs, `${blob_prefix}/${file}`, path.join(initFrom, file));
      await addFineTuneEvent(db, {
        jobId,
        type: 'model_download_complete',
        message: `Starting from the checkpoint ${job.plan.from_checkpoint}.`,
        dedupKey: 'init-from',
      });
    }

    let progress: TrainingProgress = (ctx.info.heartbeatDetails as TrainingProgress | undefined) ??
      resume ?? { step: 0 };
    let resumeFrom: string | undefined;
    if (progress.checkpoint) {
      resumeFrom = path.join(run, 'resume');
      for (const f of progress.checkpoint.files) {
        await download(blobs, `${progress.checkpoint.blobPrefix}/${f}`, path.join(resumeFrom, f));
      }
    }
    if (ctx.info.attempt > 1 || resume) {
      // A previous attempt was lost (its worker died or went silent, or its trainer hung or crashed).
      await addFineTuneEvent(db, {
        jobId,
        type: 'job_restarted',
        message: progress.checkpoint
          ? `Training resumed from the checkpoint at step ${progress.checkpoint.step} (attempt ${ctx.info.attempt}).`
          : `Training restarted from the beginning: no checkpoint had been recorded (attempt ${ctx.info.attempt}).`,
        step: progress.checkpoint?.step ?? 0,
        dedupKey: `restart-${progress.checkpoint?.step ?? 0}-${ctx.info.attempt}`,
      });
    }

    const heartbeat = () => ctx.heartbeat(progress);
    const ticker = setInterval(heartbeat, 1000);
    // Protocol events arrive faster than PostgreSQL round trips: their writes run in order, and
    // checkpoint uploads alongside, all settled before the attempt ends.
    const work = new TrainingSideWork();
    const later = (fn: () => Promise<unknown>) => work.inOrder(fn);
    // Metrics wait in `unsaved` and go in batches, one write in the line at a time: a trainer
    // steps faster than a round trip, and a write per step fell far behind the training.
    const unsaved: StepMetric[] = [];
    let flushQueued = false;
    const flushMetrics = async () => {
      const batch = unsaved.splice(0, 1000);
      flushQueued = false;
      if (unsaved.length) queueFlush();
      await recordMetrics(db, jobId, batch);
    };
    const queueFlush = () => {
      if (flushQueued) return;
      flushQueued = true;
      later(flushMetrics);
    };
    const saveMetric = (m: StepMetric) => {
      unsaved.push(m);
      queueFlush();
    };
    try {
      const result = await runTrainer({
        python,
        trainer: model.trainer.kind,
        modelDir: deps.modelDir,
        config: trainerConfig(job.plan, model, {
          trainFile,
          validationFile,
          outputDir: path.join(run, 'out'),
          resumeFrom,
          initFrom,
        }),
        signal: ctx.cancellationSignal,
        stallSeconds: deps.stallSeconds,
        onEvent: (e) => {
          switch (e.event) {
            case 'start':
              later(() =>
                recordJob(db, {
                  jobId,
                  update: { param_count: e.trainable_params, total_steps: e.total_steps },
                  event: {
                    type: 'training_start',
                    message: `Training ${e.total_steps} steps over ${e.n_epochs} epochs (${e.trainable_params} trainable parameters).`,
                    dedupKey: `training-start-${ctx.info.attempt}`,
                  },
                }),
              );
              break;
            case 'step':
              progress = { ...progress, step: e.step };
              saveMetric({
                step: e.step,
                epoch: e.epoch,
                loss: e.loss,
                lr: e.lr,
                gradNorm: e.grad_norm,
                tokens: e.tokens,
                rewardMargin: e.reward_margin,
              });
              break;
            case 'epoch':
              later(() =>
                recordJob(db, {
                  jobId,
                  update: { epochs_completed: e.epoch },
                  event: {
                    type: 'epoch_complete',
                    message: `Epoch ${e.epoch} completed at step ${e.step}.`,
                    step: e.step,
                    dedupKey: `epoch-${e.epoch}`,
                  },
                }),
              );
              break;
            case 'eval':
              saveMetric({ step: e.step, evalLoss: e.eval_loss });
              break;
            case 'checkpoint': {
              const blobPrefix = `fine-tunes/${jobId}/checkpoints/step-${e.step}`;
              work.alongside(
                uploadDir(blobs, e.path, blobPrefix).then((files) =>
                  // In line behind the writes of the steps before it: the checkpoint becomes the
                  // point a retry resumes from (the heartbeat) only once every metric up to it is
                  // stored, or a worker lost now would leave those steps unrecorded for good.
                  later(async () => {
                    await Promise.all([
                      recordCheckpoint(db, {
                        jobId,
                        step: e.step,
                        epoch: e.epoch,
                        type: 'intermediate',
                        blobPrefix,
                        files,
                      }),
                      recordJob(db, {
                        jobId,
                        event: {
                          type: 'checkpoint_save',
                          message: `Checkpoint saved at step ${e.step} (epoch ${e.epoch}).`,
                          step: e.step,
                          dedupKey: `checkpoint-${e.step}`,
                        },
                      }),
                    ]);
                    progress = { ...progress, checkpoint: { step: e.step, blobPrefix, files } };
                    heartbeat();
                  }),
                ),
              );
              break;
            }
            case 'early_stopped':
              later(() =>
                recordJob(db, {
                  jobId,
                  update: {
                    early_stopped: true,
                    early_stopping_best_step: e.best_step,
                    early_stopping_best_metric: e.best_metric,
                  },
                  event: {
                    type: 'early_stopped',
                    message: `Early stopping at step ${e.step}: no improvement; the best step was ${e.best_step} (eval loss ${e.best_metric?.toFixed(4) ?? 'not finite'}).`,
                    step: e.step,
                    dedupKey: 'early-stopped',
                  },
                }),
              );
              break;
          }
        },
      });
      await work.settled();
      if (ctx.cancellationSignal.aborted) throw new CancelledFailure('training cancelled');
      const error = result.events.find((e) => e.event === 'error');
      const done = result.events.find((e) => e.event === 'done');
      if (error && error.event === 'error') throw ApplicationFailure.nonRetryable(error.message, 'TrainerError');
      // The progress rides on the failure: after the last attempt the workflow decides from it
      // whether a new round of attempts is worth it.
      if (result.stalled) {
        const message = `the trainer said nothing for ${deps.stallSeconds}s (hung) and was stopped; it resumes from ${progress.checkpoint ? `the checkpoint at step ${progress.checkpoint.step}` : 'the beginning'}`;
        await addFineTuneEvent(db, {
          jobId,
          type: 'warning',
          level: 'warning',
          message: `Training on this worker stopped: ${message}.`,
          step: progress.step,
          dedupKey: `stalled-${progress.step}-${ctx.info.attempt}`,
        });
        throw ApplicationFailure.retryable(message, 'TrainerStalled', progress);
      }
      if (!done || done.event !== 'done' || result.exitCode !== 0) {
        // The trainer died without a verdict (killed, out of memory): worth another attempt.
        throw ApplicationFailure.retryable(
          `trainer exited with ${result.exitCode}: ${result.stderr.slice(-500)}`,
          'TrainerCrashed',
          progress,
        );
      }
      const finalPrefix = finalOutputPrefix(jobId);
      const files = await uploadDir(blobs, done.output_dir, finalPrefix);
      await recordCheckpoint(db, { jobId, step: done.step, type: 'final', blobPrefix: finalPrefix, files });
      const start = result.events.find((e) => e.event === 'start');
      return {
        steps: done.step,
        paramCount: start && start.event === 'start' ? start.trainable_params : 0,
        finalKeys: files.map((f) => `${finalPrefix}/${f}`),
        earlyStopped: done.early_stopped,
        bestStep: done.best_step ?? null,
        bestMetric: done.best_metric ?? null,
      };
    } finally {
      clearInterval(ticker);
      if (existsSync(run)) rmSync(run, { recursive: true, force: true });
    }
  }

  return {
    /**
     * One training run. Heartbeats carry the newest checkpoint; a retry (the
     * worker was lost) resumes from it instead of step 0. Cancellation stops
     * the trainer after its current step.
     */
    async trainModel({
      jobId,
      prepared,
      resume,
    }: {
      jobId: string;
      prepared: PreparedData;
      /** Where an earlier activity's attempts left off (the workflow starts a new one after progress). */
      resume?: TrainingProgress;
    }): Promise<TrainingOutcome> {
      const ctx = Context.current();
      // At most `slots.size` trainers run on this host; a task beyond them waits here, its progress
      // unchanged in its heartbeats, until one ends.
      const release = await deps.slots.take(ctx.cancellationSignal, () =>
        ctx.heartbeat(ctx.info.heartbeatDetails ?? resume ?? { step: 0 }),
      );
      try {
        return await train(ctx, { jobId, prepared, resume });
      } finally {
        release();
      }
    },
  };
}

export type FineTuneActivities = ReturnType<typeof createFineTuneActivities>;
export type TrainingActivities = ReturnType<typeof createTrainingActivities>;
