/**
 * Shared storage volumes for clusters: creating one (its row and its workflow `volume/<id>`, which
 * provisions it), growing one (never shrinking: data is never truncated), and deleting one that no
 * cluster is bound to.
 */
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { deleteVolumeRow, getVolume, insertVolume, resizeVolume, type VolumeRow } from '../../db/clusters';
import type { Db } from '../../db/pool';
import { newId } from '../../platform/ids';
import { findRegion } from '../../shared/cluster-catalog';
import { volumeWorkflowId } from '../../shared/clusters';
import { storageVolume } from '../../workflows/storage-volumes';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type { CreateVolumeBody, UpdateVolumeBody } from '../schemas/clusters';
import { startResourceWorkflowOrUndo } from '../workflows';

export async function requireVolume(db: Db, projectId: string, id: string): Promise<VolumeRow> {
  const v = await getVolume(db, projectId, id);
  if (!v) throw notFound(`Volume '${id}' not found.`);
  return v;
}

/** Creates a volume (provisioning) and starts its workflow; its row. */
export async function createVolume(
  deps: Pick<ApiDeps, 'db' | 'temporal'>,
  principal: Principal,
  body: z.infer<typeof CreateVolumeBody>,
): Promise<VolumeRow> {
  const { db, temporal } = deps;
  if (body.project_id !== undefined && body.project_id !== principal.projectId) {
    throw badRequest('project_id must be the project of the API key (or be left out).', 'project_id');
  }
  const region = findRegion(body.region);
  if (!region || !region.usable) throw badRequest(`Region '${body.region}' is not a usable region.`, 'region');
  const id = newId('vol');
  await insertVolume(db, {
    id,
    projectId: principal.projectId,
    name: body.volume_name,
    region: body.region,
    sizeTib: body.size_tib,
    lifecycleIndependent: body.is_lifecycle_independent ?? false,
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: storageVolume,
      workflowId: volumeWorkflowId(id),
      args: [{ volumeId: id }],
      projectId: principal.projectId,
      resourceType: 'volume',
      resourceId: id,
      status: 'provisioning',
      names: { projectSlug: principal.projectSlug, resource: body.volume_name },
      summary: `Volume ${body.volume_name} (${id}): ${body.size_tib} TiB in ${body.region}`,
      details: `Created by API key \`${principal.apiKeyId}\`.`,
    },
    () => deleteVolumeRow(db, id),
  );
  return (await getVolume(db, principal.projectId, id))!;
}

/** Grows a volume to `size_tib` (a smaller size is refused); its row. */
export async function growVolume(
  db: Db,
  principal: Principal,
  body: z.infer<typeof UpdateVolumeBody>,
): Promise<VolumeRow> {
  const v = await requireVolume(db, principal.projectId, body.volume_id);
  if (body.size_tib !== undefined) {
    if (body.size_tib < v.size_tib) {
      throw badRequest(
        `size_tib can only grow (the volume has ${v.size_tib} TiB); data is never truncated.`,
        'size_tib',
      );
    }
    await resizeVolume(db, v.id, body.size_tib);
  }
  return (await getVolume(db, principal.projectId, v.id))!;
}

/** Deletes a volume that no cluster is bound to (409 while one is). */
export async function deleteVolume(db: Db, principal: Principal, volumeId: string): Promise<void> {
  const v = await requireVolume(db, principal.projectId, volumeId);
  if (v.status === 'bound' || v.cluster_id) {
    throw conflict(`Volume '${v.id}' is bound to cluster '${v.cluster_id}'; delete the cluster first.`, 'volume_bound');
  }
  await deleteVolumeRow(db, v.id);
}
