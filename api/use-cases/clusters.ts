/**
 * The write paths of GPU clusters that do more than one thing: creating one (the spec's rules,
 * its shared volume, its row, then its workflow `cluster/<id>`; the rows go again if the workflow
 * cannot start), changing one (an Update its workflow validates) and deleting one (through its
 * workflow, or a new run when that is gone); and the lookup the cluster routes share.
 */
import { randomBytes } from 'node:crypto';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import {
  deleteClusterRow,
  deleteVolumeRow,
  getCluster,
  getVolume,
  insertCluster,
  insertVolume,
  type ClusterRow,
} from '../../db/clusters';
import { newId } from '../../platform/ids';
import { ClusterRuleError, resolveClusterCreate } from '../../shared/cluster-rules';
import {
  CLUSTER_RESOURCE_TYPE,
  clusterWorkflowId,
  initialState,
  type ClusterWorkflowInput,
} from '../../shared/clusters';
import { cluster, deleteClusterUpdate, updateClusterUpdate } from '../../workflows/clusters';
import type { ApiDeps } from '../deps';
import type { CreateClusterBody, UpdateClusterBody } from '../schemas/clusters';
import { executeEntityUpdate, startResourceWorkflow, startResourceWorkflowOrUndo } from '../workflows';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { withTransaction, type Db } from '../../db/pool';
import { ApiError, badRequest, conflict, notFound } from '../errors';

/** The project's cluster, or a 404 naming it. */
export async function requireCluster(db: Db, projectId: string, clusterId: string): Promise<ClusterRow> {
  const row = await getCluster(db, projectId, clusterId);
  if (!row) throw notFound(`Cluster '${clusterId}' not found.`);
  return row;
}

/** Creates a cluster from a create request; its id. */
export async function createCluster(
  deps: ApiDeps,
  principal: Principal,
  body: z.output<typeof CreateClusterBody>,
): Promise<string> {
  const { db, temporal, config } = deps;
  if (body.project_id !== undefined && body.project_id !== principal.projectId) {
    throw badRequest('project_id must be the project of the API key (or be left out).', 'project_id');
  }
  let resolved;
  try {
    resolved = resolveClusterCreate(body, new Date());
  } catch (err) {
    if (err instanceof ClusterRuleError) throw badRequest(err.message, err.param);
    throw err;
  }
  const { spec, counts } = resolved;
  if (body.volume_id) {
    const volume = await getVolume(db, principal.projectId, body.volume_id);
    if (!volume) throw badRequest(`Volume '${body.volume_id}' not found in this project.`, 'volume_id');
    if (volume.region !== spec.region) {
      throw badRequest(`Volume '${volume.id}' is in ${volume.region}, not ${spec.region}.`, 'volume_id');
    }
    if (volume.status !== 'available' && volume.status !== 'provisioning') {
      throw badRequest(`Volume '${volume.id}' is ${volume.status}; it must be available.`, 'volume_id');
    }
  }
  const clusterId = `cl-${randomBytes(6).toString('hex')}`;
  const sharedVolume = body.shared_volume;
  if (sharedVolume) spec.volume_id = newId('vol');
  const input: ClusterWorkflowInput = {
    clusterId,
    projectId: principal.projectId,
    spec,
    counts,
    settings: config.clusterSettings,
  };
  const workflowId = clusterWorkflowId(clusterId);
  // The shared volume and the cluster row are one write: neither is left without the other.
  await withTransaction(db, async (tx) => {
    if (sharedVolume && spec.volume_id) {
      await insertVolume(tx, {
        id: spec.volume_id,
        projectId: principal.projectId,
        name: sharedVolume.volume_name,
        region: spec.region,
        sizeTib: sharedVolume.size_tib,
        lifecycleIndependent: sharedVolume.is_lifecycle_independent ?? false,
        createdWithCluster: clusterId,
      });
    }
    await insertCluster(tx, { id: clusterId, projectId: principal.projectId, workflowId, state: initialState(input) });
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: cluster,
      workflowId,
      args: [input],
      projectId: principal.projectId,
      resourceType: CLUSTER_RESOURCE_TYPE,
      resourceId: clusterId,
      status: 'WaitingForControlPlaneNodes',
      gpuType: spec.gpu_type,
      names: { projectSlug: principal.projectSlug, resource: spec.cluster_name },
      summary: `Cluster ${spec.cluster_name} (${clusterId}): ${counts.num_gpus}x ${spec.gpu_type} in ${spec.region}, ${spec.cluster_type}, ${spec.billing_type}`,
      details: [
        `Created by API key \`${principal.apiKeyId}\` in project \`${principal.projectSlug}\`.`,
        `Image: CUDA ${spec.cuda_version}, driver ${spec.nvidia_driver_version}, ${spec.os_image} (\`${spec.nvidia_version_id}\`).`,
        spec.auto_scale ? `Autoscaling up to ${spec.auto_scale_max_gpus} GPUs.` : 'No autoscaling.',
      ].join('\n\n'),
    },
    async () => {
      await deleteClusterRow(db, clusterId);
      if (body.shared_volume && spec.volume_id) await deleteVolumeRow(db, spec.volume_id);
    },
  );
  return clusterId;
}

/** The answer to a message for a cluster whose workflow has ended (it was deleted, or its reservation ended). */
export const clusterNotRunning = (clusterId: string) =>
  conflict(
    `Cluster '${clusterId}' is no longer running (it was deleted or its reservation ended).`,
    'cluster_not_running',
  );

/**
 * Resizes a cluster or changes its preemptible GPUs, reservation end, add-ons or config: an
 * Update its workflow validates (refusals are 400/409), keyed by the caller's Idempotency-Key.
 * The row after the change is accepted (resizing goes on asynchronously).
 */
export async function changeCluster(
  deps: ApiDeps,
  principal: Principal,
  clusterId: string,
  change: z.output<typeof UpdateClusterBody>,
  idempotencyKey: string | undefined,
): Promise<ClusterRow> {
  const { db, temporal } = deps;
  const row = await requireCluster(db, principal.projectId, clusterId);
  if (row.deleted_at) throw conflict(`Cluster '${row.id}' was deleted.`, 'cluster_deleted');
  await executeEntityUpdate(
    temporal,
    clusterWorkflowId(row.id),
    updateClusterUpdate,
    [change],
    idempotencyKey,
    clusterNotRunning(row.id),
  );
  return (await getCluster(db, principal.projectId, row.id))!;
}

/**
 * Deletes a cluster through its workflow: nodes drained and released, volumes released; the row
 * stays readable. A cluster whose workflow is gone without having deleted it (it failed, or was
 * terminated) is torn down by a new run from its last projected state, so nothing held for it
 * is left behind.
 */
export async function deleteCluster(deps: ApiDeps, principal: Principal, row: ClusterRow): Promise<void> {
  const { db, temporal, config } = deps;
  if (row.deleted_at) return;
  const reason = 'deleted through the API';
  try {
    await executeEntityUpdate(
      temporal,
      clusterWorkflowId(row.id),
      deleteClusterUpdate,
      [{ reason }],
      undefined,
      clusterNotRunning(row.id),
    );
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 409)) throw err;
    // A 409 from the workflow itself: it is being deleted already.
    if (err.code !== 'cluster_not_running') return;
    const fresh = await getCluster(db, principal.projectId, row.id);
    if (fresh && !fresh.deleted_at) await tearDownOrphanedCluster(temporal, config, fresh, reason);
  }
}

/** Starts a cluster run that goes straight to tear-down, for a cluster whose workflow ended without deleting it. */
async function tearDownOrphanedCluster(
  temporal: ApiDeps['temporal'],
  config: ApiDeps['config'],
  row: ClusterRow,
  reason: string,
): Promise<void> {
  const state = row.state;
  try {
    await startResourceWorkflow(temporal, {
      workflow: cluster,
      workflowId: row.workflow_id,
      args: [
        {
          clusterId: row.id,
          projectId: row.project_id,
          spec: state.spec,
          counts: state.counts,
          settings: config.clusterSettings,
          carried: state,
          deleteOnStart: reason,
        },
      ],
      projectId: row.project_id,
      resourceType: CLUSTER_RESOURCE_TYPE,
      resourceId: row.id,
      status: 'Deleting',
      gpuType: state.spec.gpu_type,
      summary: `Tear-down of cluster ${state.spec.cluster_name} (${row.id}), whose workflow had ended`,
      details: `Its last run ended without deleting it; this run releases what it holds: ${reason}.`,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err; // a concurrent DELETE started it
  }
}
