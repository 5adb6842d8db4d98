/**
 * Activity doubles for the endpointRollout workflow in the workflow test tier,
 * behind the real signature (RolloutActivities): snapshots, events, traffic and
 * replica bounds are recorded; the target's health and each gate's verdict are
 * what the test programs; a snapshot of a given state can be made slow to land.
 */
import type { RolloutActivities } from '../../activities/rollouts';
import type { RolloutSnapshot, RolloutState, RolloutWorkflowInput } from '../../shared/rollouts';

export class RolloutActivityDoubles {
  readonly snapshots: RolloutSnapshot[] = [];
  readonly events: Array<{ type: string; message: string }> = [];
  readonly traffic: number[] = [];
  readonly bounds: Array<{ deploymentId: string; min: number; max: number }> = [];
  /** Verdicts of the gates to come, in order; once spent, gates pass. */
  gates: boolean[] = [];
  /** Snapshots of this state take this long to record (a slow database under an Update handler). */
  slow: { state: RolloutState; ms: number } | undefined;

  get latest(): RolloutSnapshot | undefined {
    return this.snapshots.at(-1);
  }

  activities(): RolloutActivities {
    const self = this;
    return {
      async recordRollout({ snapshot }) {
        if (self.slow?.state === snapshot.state) await new Promise((r) => setTimeout(r, self.slow!.ms));
        self.snapshots.push(structuredClone(snapshot));
      },
      async rolloutEvent({ type, message }) {
        self.events.push({ type, message });
      },
      async setRolloutTraffic({ percent }) {
        self.traffic.push(percent);
      },
      async noteRolloutReplicas({ deploymentId, min, max }) {
        self.bounds.push({ deploymentId, min, max });
      },
      async rolloutTargetHealth() {
        return { ready: true, message: 'target ready (activity double)' };
      },
      async evaluateRolloutGate() {
        const pass = self.gates.shift() ?? true;
        return pass
          ? { pass, message: 'Gate passed (activity double).', metrics: [] }
          : {
              pass,
              category: 'ROLLOUT_FAILURE_CATEGORY_METRIC_REGRESSION',
              message: 'error rate 12% above the 5% threshold (activity double)',
              metrics: [],
            };
      },
    };
  }
}

/** A canary rollout of two steps (25%, then 100%) with a 60 s soak, between deployments that have no container. */
export function rolloutInput(rolloutId: string): RolloutWorkflowInput {
  return {
    rolloutId,
    endpointId: 'ep-workflow-tier',
    sourceDeploymentId: 'dep-source',
    targetDeploymentId: 'dep-target',
    sourceContainerId: null,
    targetContainerId: null,
    source: { min: 1, max: 1, replicas: 1 },
    target: { min: 1, max: 1 },
    plan: {
      strategy: 'ROLLOUT_STRATEGY_TYPE_CANARY',
      steps: [{ traffic: 25 }, { traffic: 100 }],
      stepIntervalSeconds: 60,
      metrics: [],
      finalSourceReplicas: 0,
      finalTargetReplicas: 1,
    },
    targetReadyTimeoutSeconds: 60,
  };
}
