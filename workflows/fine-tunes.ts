/**
 * fineTune (`fine-tune/<ft-id>`): tokenize on the control queue, wait for a
 * worker on the base model's gpu.<type> queue (saying so while none is
 * there), train there, store the weights, and end completed, cancelled or in
 * error, with an event for every step a user would want to see.
 */
import {
  ActivityCancellationType,
  ActivityFailure,
  CancellationScope,
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
import type { ModelRegistryActivities } from '../activities/model-registry';
import { finalOutputPrefix, type FineTuneStatus, type FineTuneWorkflowInput } from '../common/fine-tunes';
import type { GpuType } from '../common/gpu-types';
import { statusSearchAttributes } from '../common/search-attributes';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../workers/task-queues';

const control = proxyActivities<FineTuneActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '2 minutes',
  retry: {
    initialInterval: '1 second',
    maximumInterval: '1 minute',
    maximumAttempts: 20,
    nonRetryableErrorTypes: ['JobGone', 'UnknownModel', 'FileUnusable'],
  },
});

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

export async function fineTune(input: FineTuneWorkflowInput): Promise<FineTuneStatus> {
  const { jobId } = input;
  const queue = gpuTaskQueue(input.gpuType as GpuType);
  const record = (r: Omit<JobRecord, 'jobId'>) => control.recordFineTune({ jobId, ...r });
  const setStatus = async (status: FineTuneStatus, r: Omit<JobRecord, 'jobId'> = {}) => {
    await record({ ...r, update: { ...r.update, status } });
    upsertSearchAttributes(statusSearchAttributes(status));
  };

  try {
    setCurrentDetails('Tokenizing the training data.');
    const prepared = await control.prepareTrainingData.executeWithOptions({ summary: 'tokenize' }, [{ jobId }]);
    // Added after the first jobs ran: histories recorded before it replay without the step.
    if (patched(PATCHES.tokenizedDatasetArchive.id)) {
      await control.archiveTokenizedDataset.executeWithOptions({ summary: 'archive tokenized dataset' }, [
        { jobId, prepared },
      ]);
    }

    // Queued until a worker on the GPU queue answers; a short probe, repeated, says so in the events.
    await setStatus('queued');
    const probe = proxyActivities<AcceleratorActivities>({
      taskQueue: queue,
      scheduleToStartTimeout: `${input.queueProbeSeconds} seconds`,
      startToCloseTimeout: '1 minute',
      retry: { maximumAttempts: 3 },
    });
    for (let waited = 0; ; waited++) {
      setCurrentDetails(`Queued: waiting for a worker on ${queue}.`);
      try {
        await probe.describeAcceleratorHost.executeWithOptions({ summary: `wait for ${queue}` }, [
          { gpuType: input.gpuType as GpuType },
        ]);
        break;
      } catch (err) {
        if (!isScheduleToStart(err)) throw err;
        if (waited === 0) {
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
    const outcome = await gpu.trainModel.executeWithOptions({ summary: 'train' }, [{ jobId, prepared }]);
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
