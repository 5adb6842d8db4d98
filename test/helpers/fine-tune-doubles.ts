/**
 * Activity doubles for the fineTune workflow in the workflow test tier, behind
 * the real signatures (FineTuneActivities, TrainingActivities,
 * ModelRegistryActivities): the job's status and events are recorded in
 * memory; training runs the steps the test programs, failing attempts with the
 * progress a real attempt would carry.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { FineTuneActivities, JobRecord, TrainingActivities } from '../../activities/fine-tunes';
import type { ModelRegistryActivities } from '../../activities/models';
import type { FineTuneWorkflowInput, TrainingProgress } from '../../shared/fine-tunes';

type ControlActivities = FineTuneActivities & Pick<ModelRegistryActivities, 'registerFineTuneOutputs'>;

export class FineTuneActivityDoubles {
  readonly records: JobRecord[] = [];
  /** Each training attempt: where it started (the step of the checkpoint it resumed from, or 0). */
  readonly attempts: number[] = [];
  /**
   * Each attempt's fate, in order: a number is a crash after saving a checkpoint at that step;
   * 'stuck' is a crash with no new checkpoint; once the list is spent, attempts succeed.
   */
  failures: Array<number | 'stuck'> = [];

  get status(): string | undefined {
    return this.records.filter((r) => r.update?.status).at(-1)?.update?.status;
  }

  control(): ControlActivities {
    const self = this;
    return {
      async recordFineTune(r) {
        self.records.push(structuredClone(r));
      },
      async releaseFineTuneFiles() {},
      async archiveTokenizedDataset() {
        return 'archive-key';
      },
      async prepareTrainingData() {
        return { trainKey: 'train-key', evalKey: null, trainRows: 8, tokenCount: 256 };
      },
      async registerFineTuneOutputs() {
        return { modelObjectId: 'model-object' };
      },
    };
  }

  training(): TrainingActivities {
    const self = this;
    let checkpoint: TrainingProgress['checkpoint'];
    return {
      async trainModel({ resume }) {
        // A retry of the same activity would resume from its heartbeat; this double keeps it here.
        checkpoint = checkpoint ?? resume?.checkpoint;
        self.attempts.push(checkpoint?.step ?? 0);
        const fate = self.failures.shift();
        if (fate === undefined) {
          return {
            steps: 100,
            paramCount: 1,
            finalKeys: ['final/adapter.safetensors'],
            earlyStopped: false,
            bestStep: null,
            bestMetric: null,
          };
        }
        if (fate !== 'stuck')
          checkpoint = { step: fate, blobPrefix: `checkpoints/step-${fate}`, files: ['adapter.safetensors'] };
        const progress: TrainingProgress = { step: checkpoint?.step ?? 0, checkpoint };
        throw ApplicationFailure.retryable('trainer exited with null: killed', 'TrainerCrashed', progress);
      },
    };
  }
}

export function fineTuneInput(jobId: string, opts: Partial<FineTuneWorkflowInput> = {}): FineTuneWorkflowInput {
  return {
    jobId,
    projectId: 'proj-workflow-tier',
    gpuType: 'H100_SXM',
    queueProbeSeconds: 30,
    heartbeatTimeoutSeconds: 60,
    ...opts,
  };
}
