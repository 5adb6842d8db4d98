/**
 * How a dedicated endpoint is shown (the official SDK's beta.endpoints): the endpoint with its
 * traffic split and deployments, a deployment with its state, and a deployment as validateOnly
 * would create it.
 */
import type { Principal } from '../../db/accounts';
import type { EndpointDeploymentRow, EndpointRow, listEndpointEvents } from '../../db/endpoints';
import { deploymentState, trafficShares } from '../../shared/endpoint-state';
import type { PlannedDeployment } from '../use-cases/endpoints';

export function toDeployment(d: EndpointDeploymentRow, share = 0) {
  const { state, message } = deploymentState(d);
  return {
    id: d.id,
    endpointId: d.endpoint_id,
    projectId: d.project_id,
    name: d.name,
    model: d.model,
    modelId: d.model_id,
    modelRevisionId: d.model_revision_id ?? '',
    config: d.config_id ? `projects/${d.project_id}/configs/${d.config_id}` : '',
    configId: d.config_id ?? '',
    hardware: d.hardware,
    autoscaling: d.autoscaling,
    enableLora: d.enable_lora,
    status: { state, message, readyReplicas: d.ready_replicas, scheduledReplicas: d.desired_replicas ?? 0 },
    desiredReplicas: d.desired_replicas ?? 0,
    trafficMode: 'TRAFFIC_MODE_LIVE' as const,
    estimatedEffectiveTrafficShare: share,
    etag: d.etag,
    createdAt: new Date(d.created_at).toISOString(),
    updatedAt: new Date(d.updated_at).toISOString(),
  };
}

/** The deployment as it would be created (no id, etag or replicas: nothing was created), for validateOnly. */
export function validatedDeployment(principal: Principal, { plan, profile, row }: PlannedDeployment) {
  const now = new Date().toISOString();
  return {
    ...row,
    autoscaling: { ...row.autoscaling } as Record<string, unknown>,
    id: '',
    modelRevisionId: plan.revisionId ?? '',
    config: profile ? `projects/${principal.projectId}/configs/${profile.id}` : '',
    configId: profile?.id ?? '',
    status: {
      state: plan.servable ? ('DEPLOYMENT_STATE_PROVISIONING' as const) : ('DEPLOYMENT_STATE_FAILED' as const),
      message: plan.servable ? 'Valid: nothing was created (validateOnly).' : plan.reason,
      readyReplicas: 0,
      scheduledReplicas: 0,
    },
    desiredReplicas: 0,
    trafficMode: 'TRAFFIC_MODE_LIVE' as const,
    estimatedEffectiveTrafficShare: 0,
    etag: '',
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * The split in effect: the stored weights of deployments that still exist, or, where none has
 * weight, the even split the gateway then applies (weight 1 each), so a client that reads the
 * split (the Python CLI finds a rollout's source by it) sees where traffic goes.
 */
function effectiveSplit(e: EndpointRow, deployments: EndpointDeploymentRow[]) {
  const live = deployments.filter((d) => !d.failure && !d.deleting);
  const stored = e.traffic_split.filter((s) => deployments.some((d) => d.id === s.deploymentId));
  if (stored.some((s) => s.weight > 0 && live.some((d) => d.id === s.deploymentId))) return stored;
  return live.map((d) => ({ deploymentId: d.id, weight: 1 }));
}

export function toEndpoint(e: EndpointRow, deployments: EndpointDeploymentRow[]) {
  const shares = trafficShares(e, deployments);
  return {
    id: e.id,
    name: e.name,
    projectId: e.project_id,
    endpointType: 'ENDPOINT_TYPE_DEDICATED' as const,
    visibility: e.visibility,
    etag: e.etag,
    trafficSplit: effectiveSplit(e, deployments),
    ...(e.active_rollout_id ? { activeRolloutId: e.active_rollout_id } : {}),
    // A deployment being deleted is no longer the endpoint's: it serves nothing and holds no deletion
    // of the endpoint. Listed, it raced the Python CLI's `endpoints rm --force`, which changes and
    // deletes each listed deployment and failed when one finished leaving in between (a 404). It
    // stays readable by id, DEPLOYMENT_STATE_STOPPING, until it is gone.
    deployments: deployments
      .filter((d) => !d.deleting)
      .map((d) => {
        const full = toDeployment(d, shares.get(d.id) ?? 0);
        return {
          id: full.id,
          name: full.name,
          model: full.model,
          modelId: full.modelId,
          autoscaling: full.autoscaling,
          state: full.status.state,
          readyReplicas: full.status.readyReplicas,
          desiredReplicas: full.desiredReplicas,
          hardware: full.hardware,
          trafficMode: full.trafficMode,
          estimatedEffectiveTrafficShare: full.estimatedEffectiveTrafficShare,
          createdAt: full.createdAt,
        };
      }),
    createdAt: new Date(e.created_at).toISOString(),
    updatedAt: new Date(e.updated_at).toISOString(),
  };
}

type EndpointEventRow = Awaited<ReturnType<typeof listEndpointEvents>>[number];

/** An endpoint's or one of its deployments' event, as the SDK lists them. */
export const toEndpointEvent = (r: EndpointEventRow) => ({
  id: r.id,
  createdAt: new Date(r.created_at).toISOString(),
  endpointId: r.endpoint_id,
  level: r.level,
  source: r.deployment_id ?? r.endpoint_id,
  sourceKind: r.source_kind,
  type: r.type,
  message: r.message,
  ...(r.deployment_id ? { deploymentId: r.deployment_id } : {}),
  ...(r.old_replicas !== null ? { oldReplicas: r.old_replicas } : {}),
  ...(r.new_replicas !== null ? { newReplicas: r.new_replicas } : {}),
  ...(r.status ? { status: r.status } : {}),
  ...(r.subject_id ? { subjectId: r.subject_id } : {}),
});
