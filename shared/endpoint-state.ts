/**
 * What an endpoint deployment is doing, read from the container deployment
 * that serves it, and how an endpoint's traffic divides among its deployments.
 * Shared by the endpoints API and the inference gateway.
 */
import type { EndpointDeploymentRow, EndpointRow } from '../db/endpoints';

export type DeploymentStateName =
  | 'DEPLOYMENT_STATE_PROVISIONING'
  | 'DEPLOYMENT_STATE_READY'
  | 'DEPLOYMENT_STATE_SCALING'
  | 'DEPLOYMENT_STATE_DEGRADED'
  | 'DEPLOYMENT_STATE_FAILED'
  | 'DEPLOYMENT_STATE_STOPPED'
  | 'DEPLOYMENT_STATE_STOPPING';

/** The SDK's state of an endpoint deployment, from the container deployment serving it. */
export function deploymentState(d: EndpointDeploymentRow): { state: DeploymentStateName; message: string } {
  if (d.failure) return { state: 'DEPLOYMENT_STATE_FAILED', message: d.failure };
  if (d.deleting) return { state: 'DEPLOYMENT_STATE_STOPPING', message: 'Stopping its replicas.' };
  if (!d.container_deployment_id || !d.container_status)
    return { state: 'DEPLOYMENT_STATE_STOPPED', message: 'No replicas.' };
  switch (d.container_status) {
    case 'Ready':
      return { state: 'DEPLOYMENT_STATE_READY', message: `${d.ready_replicas} replica(s) serving.` };
    case 'ScaledToZero':
      // At most zero replicas (a rollout drained it) nothing wakes it: it is stopped, not idle.
      return Number(d.autoscaling.maxReplicas ?? 1) < 1
        ? { state: 'DEPLOYMENT_STATE_STOPPED', message: 'Stopped: its replica bounds are 0 (drained by a rollout).' }
        : { state: 'DEPLOYMENT_STATE_READY', message: 'Scaled to zero; the next request wakes a replica.' };
    case 'Failed':
      return { state: 'DEPLOYMENT_STATE_FAILED', message: 'Replicas keep failing to start; see the events.' };
    case 'Scaling':
      return { state: 'DEPLOYMENT_STATE_SCALING', message: `Scaling to ${d.desired_replicas} replica(s).` };
    default:
      return d.ready_replicas > 0
        ? { state: 'DEPLOYMENT_STATE_SCALING', message: `Moving to ${d.desired_replicas} replica(s).` }
        : { state: 'DEPLOYMENT_STATE_PROVISIONING', message: 'Starting replicas and loading the model.' };
  }
}

/**
 * Whether a rollout's target can take its traffic: READY, or moving its replica count while at least
 * `minReady` replicas (1 when the step names none) already serve. A target the autoscaler is
 * growing, or still starting one replica beyond what a step needs, is serving, not unready.
 */
export function canTakeTraffic(d: EndpointDeploymentRow, minReady?: number): boolean {
  const { state } = deploymentState(d);
  const needed = Math.max(1, minReady ?? 1);
  if (state === 'DEPLOYMENT_STATE_READY') return minReady === undefined || d.ready_replicas >= minReady;
  return state === 'DEPLOYMENT_STATE_SCALING' && d.ready_replicas >= needed;
}

/** Each deployment's share of traffic: the split's weights, or an even share of the ready ones. */
export function trafficShares(e: EndpointRow, deployments: EndpointDeploymentRow[]): Map<string, number> {
  const live = deployments.filter((d) => !d.failure && !d.deleting);
  const shares = new Map<string, number>();
  const split = e.traffic_split.filter((s) => live.some((d) => d.id === s.deploymentId) && s.weight > 0);
  const total = split.reduce((n, s) => n + s.weight, 0);
  if (total > 0) for (const s of split) shares.set(s.deploymentId, s.weight / total);
  else for (const d of live) shares.set(d.id, 1 / live.length);
  return shares;
}
