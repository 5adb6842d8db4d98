/**
 * fineTune (`fine-tune/<ft-id>`): tokenize on the control queue, wait for a
 * worker on the base model's gpu.<type> queue (saying so while none is
 * there), train there, store the weights, and end completed, cancelled or in
 * error, with an event for every step a user would want to see.
 */
import {
  ActivityCancellationType,
  type ActivityOptions,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  TimeoutFailure,
  continueAsNew,
  ContinueAsNew,
  isCancellation,
  patched,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { isScheduleToStart } from './failures';
import { PATCHES } from './patches';
import type { AcceleratorActivities } from '../activities/accelerator';
import type { FineTuneActivities, JobRecord, TrainingActivities } from '../activities/fine-tunes';
import type { ModelRegistryActivities } from '../activities/models';
import {
  finalOutputPrefix,
  type FineTuneStatus,
  type FineTuneWorkflowInput,
  type PreparedData,
  type TrainingOutcome,
  type TrainingProgress,
} from '../shared/fine-tunes';
import type { GpuType } from '../shared/gpu-types';
import { statusSearchAttributes } from '../shared/search-attributes';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../shared/task-queues';

const controlOptions: ActivityOptions = {
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 minutes',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '1 minute',
    maximumAttempts: 20,
    nonRetryableErrorTypes: ['JobGone', 'UnknownModel', 'FileUnusable'],
  },
};
/**
 * Bookkeeping (records, the charge, releasing files). These do not heartbeat, so they carry no
 * heartbeat timeout: pricing a large dataset takes longer than one would allow.
 */
const control = proxyActivities<FineTuneActivities>(controlOptions);
/** Work over the dataset that heartbeats as it goes: a worker lost mid-way is noticed in 2 minutes. */
const dataWork = proxyActivities<FineTuneActivities>({ ...controlOptions, heartbeatTimeout: '2 minutes' });

// Registration copies weights; a failure leaves the job completed without registry ids (the spec's rule).
const registry = proxyActivities<ModelRegistryActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '2 hours',
  retry: { initialInterval: '2 seconds', maximumAttempts: 5, nonRetryableErrorTypes: ['JobGone', 'NoFinalWeights'] },
});

function reason(err: unknown): string {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return (cause as Error)?.message ?? String(err);
}

/**
 * The n-th wait for a GPU worker (0: the first): the configured probe, doubling up to `max`. A probe
 * is an activity waiting to be taken, so a worker that appears takes it at once, however long the
 * wait; a long outage costs a few events an hour, not some every 30 s.
 */
const probeSeconds = (configured: number, waits: number, max: number) =>
  Math.min(Math.max(configured, max), configured * 2 ** Math.min(waits, 16));

/** How far a failed training activity got: its last heartbeat, or the progress its failure carries. */
const progressOf = (err: unknown): TrainingProgress | undefined => {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  if (cause instanceof TimeoutFailure) return cause.lastHeartbeatDetails as TrainingProgress | undefined;
  if (cause instanceof ApplicationFailure && !cause.nonRetryable) return cause.details?.[0] as TrainingProgress;
  return undefined;
};

export async function fineTune(input: FineTuneWorkflowInput): Promise<FineTuneStatus> {
  const { jobId } = input;
  const queue = gpuTaskQueue(input.gpuType as GpuType);
  const record = (r: Omit<JobRecord, 'jobId'>) => control.recordFineTune({ jobId, ...r });
  const setStatus = async (status: FineTuneStatus, r: Omit<JobRecord, 'jobId'> = {}) => {
    await record({ ...r, update: { ...r.update, status } });
    upsertSearchAttributes(statusSearchAttributes(status));
  };

  try {
    let prepared: PreparedData;
    if (input.queued) {
      prepared = input.queued.prepared; // a continued run: tokenized already, still queued
    } else {
      setCurrentDetails('Tokenizing the training data.');
      prepared = await dataWork.prepareTrainingData.executeWithOptions({ summary: 'tokenize' }, [{ jobId }]);
      // Added after the first jobs ran: histories recorded before it replay without the step.
      if (patched(PATCHES.tokenizedDatasetArchive.id)) {
        await dataWork.archiveTokenizedDataset.executeWithOptions({ summary: 'archive tokenized dataset' }, [
          { jobId, prepared },
        ]);
      }
      // Queued until a worker on the GPU queue answers; a short probe, repeated, says so in the events.
      await setStatus('queued');
    }

    for (let waits = input.queued?.waits ?? 0, inThisRun = 0; ; waits++, inThisRun++) {
      setCurrentDetails(`Queued: waiting for a worker on ${queue}.`);
      // (Before the backoff patch every probe waited queueProbeSeconds and the run never continued as new.)
      const backoff = waits > 0 && patched(PATCHES.fineTuneQueueBackoff.id);
      if (backoff && inThisRun >= (input.probesPerRun ?? 50)) {
        await continueAsNew<typeof fineTune>({ ...input, queued: { prepared, waits } });
      }
      const seconds = backoff
        ? probeSeconds(input.queueProbeSeconds, waits, input.maxQueueProbeSeconds ?? 900)
        : input.queueProbeSeconds;
      const probe = proxyActivities<AcceleratorActivities>({
        taskQueue: queue,
        scheduleToStartTimeout: `${seconds} seconds`,
        startToCloseTimeout: '1 minute',
        retry: { maximumAttempts: 3 },
      });
      try {
        await probe.describeAcceleratorHost.executeWithOptions({ summary: `wait for ${queue}` }, [
          { gpuType: input.gpuType as GpuType },
        ]);
        break;
      } catch (err) {
        if (!isScheduleToStart(err)) throw err;
        if (waits === 0) {
          await record({
            event: {
              type: 'warning',
              level: 'warning',
              message: `No worker is serving ${queue} yet; the job stays queued until one is.`,
              dedupKey: 'no-gpu-worker',
            },
          });
        }
      }
    }

    await setStatus('running', {
      update: { started: true },
      event: { type: 'job_start', message: `Training started on ${queue}.`, dedupKey: 'job-start' },
    });
    setCurrentDetails(`Training on ${queue}.`);
    const gpu = proxyActivities<TrainingActivities>({
      taskQueue: queue,
      // A cancelled job is recorded as cancelled only once the trainer has really stopped.
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      startToCloseTimeout: '7 days',
      heartbeatTimeout: `${input.heartbeatTimeoutSeconds} seconds`,
      retry: {
        initialInterval: '2 seconds',
        maximumInterval: '1 minute',
        maximumAttempts: 5,
        nonRetryableErrorTypes: ['JobGone', 'TrainerError'],
      },
    });
    let outcome: TrainingOutcome;
    let resume: TrainingProgress | undefined;
    for (;;) {
      try {
        outcome = await gpu.trainModel.executeWithOptions(
          { summary: resume?.checkpoint ? `train (from step ${resume.checkpoint.step})` : 'train' },
          [{ jobId, prepared, ...(resume ? { resume } : {}) }],
        );
        break;
      } catch (err) {
        if (isCancellation(err)) throw err;
        // Worker restarts and hung trainers spend attempts; only attempts that moved nothing end the
        // job. (Before this patch five lost attempts failed a job of any length.)
        const progress = progressOf(err);
        const from = resume?.checkpoint?.step ?? 0;
        if (!progress?.checkpoint || progress.checkpoint.step <= from) throw err;
        if (!patched(PATCHES.trainingBudgetCountsProgress.id)) throw err;
        resume = progress;
        await record({
          event: {
            type: 'warning',
            level: 'warning',
            message: `Training attempts ended (${reason(err)}) after reaching the checkpoint at step ${progress.checkpoint.step}; it continues from there.`,
            step: progress.checkpoint.step,
            dedupKey: `continued-${progress.checkpoint.step}`,
          },
        });
      }
    }
    await record({
      event: {
        type: 'training_complete',
        message: `Training finished after ${outcome.steps} steps.`,
        dedupKey: 'training-complete',
      },
    });

    await setStatus('uploading', {
      event: { type: 'model_uploading', message: 'Storing the model weights.', dedupKey: 'model-uploading' },
    });
    await record({
      update: { output_prefix: finalOutputPrefix(jobId) },
      event: {
        type: 'model_upload_complete',
        message: `Stored ${outcome.finalKeys.length} files of the final model.`,
        dedupKey: 'model-upload-complete',
      },
    });
    // Added after the first jobs ran: histories recorded before it replay without the step.
    if (patched(PATCHES.modelRegistry.id)) {
      try {
        await registry.registerFineTuneOutputs.executeWithOptions({ summary: 'register in the model registry' }, [
          { jobId },
        ]);
      } catch (err) {
        if (isCancellation(err)) throw err;
        await record({
          event: {
            type: 'warning',
            level: 'warning',
            message: `The weights are stored but could not be registered in the model registry: ${reason(err)}`,
            dedupKey: 'registry-failed',
          },
        });
      }
    }
    await control.releaseFineTuneFiles({ jobId });
    await setStatus('completed', {
      event: { type: 'job_complete', message: 'Fine-tuning job completed.', dedupKey: 'job-complete' },
    });
    setCurrentDetails('Completed.');
    return 'completed';
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err; // the hand-over of a queued job to its next run
    if (isCancellation(err)) {
      // Recording the end must not itself be cancelled.
      await CancellationScope.nonCancellable(async () => {
        await control.releaseFineTuneFiles({ jobId });
        await setStatus('cancelled', {
          event: { type: 'job_stopped', message: 'The job was cancelled; training stopped.', dedupKey: 'job-stopped' },
        });
      });
      setCurrentDetails('Cancelled.');
      return 'cancelled';
    }
    const message = reason(err);
    await control.releaseFineTuneFiles({ jobId });
    await setStatus('error', {
      update: { error: message },
      event: { type: 'job_error', level: 'error', message: `The job failed: ${message}`, dedupKey: 'job-error' },
    });
    setCurrentDetails(`Error: ${message}`);
    return 'error';
  }
}
