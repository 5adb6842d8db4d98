/**
 * The two deployments of an endpoint rollout, as the rollout (rollout-entity.ts)
 * acts on them: their replica bounds (noted on the endpoint deployment and
 * sent to the container deployment's workflow), the target's readiness, and
 * the rollout's events on the endpoint. Workflow code: deterministic.
 */
import { condition, getExternalWorkflowHandle, type ActivityInterfaceFor } from '@temporalio/workflow';
import type { RolloutActivities } from '../activities/rollouts';
import { deploymentWorkflowId } from '../shared/deployments';
import type { RolloutWorkflowInput } from '../shared/rollouts';
import { setReplicaBoundsSignal } from './deployments';

/** How often a rollout looks again at a target that is not ready yet. */
const READY_POLL_SECONDS = 2;

export class RolloutPair {
  /** What every activity of the rollout is told about the pair. */
  readonly ids;

  constructor(
    private readonly input: RolloutWorkflowInput,
    private readonly control: ActivityInterfaceFor<RolloutActivities>,
  ) {
    this.ids = {
      rolloutId: input.rolloutId,
      endpointId: input.endpointId,
      sourceDeploymentId: input.sourceDeploymentId,
      targetDeploymentId: input.targetDeploymentId,
    };
  }

  event(type: string, message: string, level: 'LEVEL_INFO' | 'LEVEL_WARN' | 'LEVEL_ERROR' = 'LEVEL_INFO') {
    return this.control.rolloutEvent({ ...this.ids, type, message, level });
  }

  /** New replica bounds for one of the pair: noted on the endpoint deployment, sent to its workflow. */
  async bounds(which: 'source' | 'target', min: number, max: number, why: string) {
    const input = this.input;
    const containerId = which === 'source' ? input.sourceContainerId : input.targetContainerId;
    const deploymentId = which === 'source' ? input.sourceDeploymentId : input.targetDeploymentId;
    await this.control.noteRolloutReplicas({ ...this.ids, deploymentId, min, max, why });
    if (!containerId) return;
    try {
      await getExternalWorkflowHandle(deploymentWorkflowId(containerId)).signal(setReplicaBoundsSignal, {
        min_replicas: min,
        max_replicas: max,
      });
    } catch {
      // Its workflow is gone (the deployment was deleted); the gate reports the target, and a gone source needs nothing.
    }
  }

  /** Waits for the target to be ready: 'ready', 'interrupted' by a command, or 'timeout' with the last reason. */
  async targetReady(
    minReady: number | undefined,
    interrupted: () => boolean,
  ): Promise<{ outcome: 'ready' | 'interrupted' | 'timeout'; message: string }> {
    const deadline = Date.now() + this.input.targetReadyTimeoutSeconds * 1000;
    for (;;) {
      const health = await this.control.rolloutTargetHealth({ ...this.ids, minReady });
      if (health.ready) return { outcome: 'ready', message: health.message };
      if (Date.now() >= deadline) return { outcome: 'timeout', message: health.message };
      if (await condition(interrupted, `${READY_POLL_SECONDS} seconds`)) return { outcome: 'interrupted', message: '' };
    }
  }
}
