/**
 * How an endpoint rollout is shown (the official SDK's beta.endpoints.rollouts).
 */
import type { RolloutRow } from '../../db/rollouts';

/** A rollout as the API answers it. */
export function toRollout(r: RolloutRow) {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : undefined);
  return {
    id: r.id,
    createdAt: iso(r.created_at)!,
    endpointId: r.endpoint_id,
    sourceDeploymentId: r.source_deployment_id,
    targetDeploymentId: r.target_deployment_id,
    strategy: r.strategy,
    state: r.state,
    status: {
      steps: r.status.steps,
      totalSteps: r.spec.steps.length,
      ...(r.status.condition ? { condition: r.status.condition } : {}),
      ...(r.status.updatedAt ? { updatedAt: r.status.updatedAt } : {}),
    },
    ...(r.current_step !== null ? { currentStep: r.current_step } : {}),
    ...(r.current_traffic_percent !== null ? { currentTrafficPercent: r.current_traffic_percent } : {}),
    ...(r.pause_info ? { pauseInfo: r.pause_info } : {}),
    ...(r.started_at ? { startedAt: iso(r.started_at) } : {}),
    ...(r.completed_at ? { completedAt: iso(r.completed_at) } : {}),
    etag: r.etag,
  };
}
