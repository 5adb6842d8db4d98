/**
 * What the API and operators see of an endpoint rollout (rollout-entity.ts): its snapshot, recorded
 * through the `recordRollout` activity with a version the API keeps the newest of, and its state as
 * the run's search attributes and details. Workflow code: a change to the commands it issues goes
 * behind a patch (patches.ts).
 */
import { patched } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { StatusProjection } from './entity-kit';
import type { RolloutActivities } from '../activities/rollouts';
import type { RolloutSnapshot, RolloutWorkflowInput, StepRecord } from '../shared/rollouts';

/** The workflow's clock (replayed as recorded), as the snapshot's timestamps are written. */
export const now = () => new Date().toISOString();

export class RolloutView {
  readonly snap: RolloutSnapshot;
  private version = 0;
  // The state operators search by (GantryStatus/GantryPhase); the API sets RUNNING at start.
  // (Before this patch the search attributes kept the state the rollout started in.)
  private readonly status = new StatusProjection('ROLLOUT_STATE_RUNNING', () =>
    patched(PATCHES.rolloutStatusAndHandlers.id),
  );

  constructor(
    private readonly input: RolloutWorkflowInput,
    private readonly recordRollout: RolloutActivities['recordRollout'],
  ) {
    this.snap = {
      state: 'ROLLOUT_STATE_RUNNING',
      currentStep: 0,
      currentTrafficPercent: 0,
      startedAt: now(),
      steps: input.plan.steps.map((s, i): StepRecord => ({
        stepIndex: i,
        targetTrafficPercent: s.traffic,
        state: 'ROLLOUT_STEP_STATE_PENDING',
      })),
    };
  }

  /** The current step's record. */
  currentStep(): StepRecord {
    return this.snap.steps[this.snap.currentStep ?? 0];
  }

  /** Shows the snapshot as it stands: the run's search attributes and details, and the API's copy. */
  async record(): Promise<void> {
    const snap = this.snap;
    this.status.show(
      snap.state,
      `**${snap.state}** step ${snap.currentStep}/${this.input.plan.steps.length}, ${snap.currentTrafficPercent}% to ${this.input.targetDeploymentId}`,
    );
    await this.recordRollout({ rolloutId: this.input.rolloutId, version: ++this.version, snapshot: snap });
  }
}
