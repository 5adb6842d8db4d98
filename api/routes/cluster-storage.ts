/**
 * Shared storage volumes for clusters (`/compute/clusters/storage/volumes`,
 * the SDK's beta.clusters.storage): create (provisioned by the workflow
 * volume/<id>), list, get, resize (PUT, grow only), delete (not while bound).
 */
import { volumeWorkflowId } from '../../shared/clusters';
import { findRegion } from '../../shared/cluster-catalog';
import { newId } from '../../platform/ids';
import { deleteVolumeRow, getVolume, insertVolume, listVolumes, resizeVolume, type VolumeRow } from '../../db/clusters';
import { storageVolume } from '../../workflows/storage-volumes';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CreateVolumeBody,
  ListVolumesQuery,
  UpdateVolumeBody,
  VolumeDeleteSchema,
  VolumeIdParams,
  VolumeListSchema,
  VolumeSchema,
} from '../schemas/clusters';
import { startResourceWorkflowOrUndo } from '../workflows';

const toVolume = (v: VolumeRow) => ({
  volume_id: v.id,
  volume_name: v.name,
  size_tib: v.size_tib,
  status: v.status,
  region: v.region,
  is_lifecycle_independent: v.is_lifecycle_independent,
  ...(v.cluster_id ? { cluster_id: v.cluster_id } : {}),
});

export function addClusterStorageRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal } = deps;
  const BASE = '/compute/clusters/storage/volumes';

  async function requireVolume(projectId: string, id: string) {
    const v = await getVolume(db, projectId, id);
    if (!v) throw notFound(`Volume '${id}' not found.`);
    return v;
  }

  router.add({
    method: 'post',
    path: BASE,
    operationId: 'createClusterVolume',
    summary: 'Create a shared volume for clusters in a region',
    tags: ['clusters'],
    body: CreateVolumeBody,
    errors: [503],
    response: { status: 200, description: 'The volume, provisioning', schema: VolumeSchema },
    handler: async ({ body, principal }) => {
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
      return toVolume((await getVolume(db, principal.projectId, id))!);
    },
  });

  router.add({
    method: 'get',
    path: BASE,
    operationId: 'listClusterVolumes',
    summary: "The project's shared volumes",
    tags: ['clusters'],
    query: ListVolumesQuery,
    response: { status: 200, description: 'Volumes', schema: VolumeListSchema },
    handler: async ({ query, principal }) => {
      if (query.projectId && query.projectId !== principal.projectId) return { volumes: [] };
      return { volumes: (await listVolumes(db, principal.projectId)).map(toVolume) };
    },
  });

  router.add({
    method: 'get',
    path: `${BASE}/:volume_id`,
    operationId: 'getClusterVolume',
    summary: 'A shared volume',
    tags: ['clusters'],
    params: VolumeIdParams,
    errors: [404],
    response: { status: 200, description: 'The volume', schema: VolumeSchema },
    handler: async ({ params, principal }) => toVolume(await requireVolume(principal.projectId, params.volume_id)),
  });

  router.add({
    method: 'put',
    path: BASE,
    operationId: 'updateClusterVolume',
    summary: 'Grow a shared volume',
    tags: ['clusters'],
    body: UpdateVolumeBody,
    errors: [404],
    response: { status: 200, description: 'The volume', schema: VolumeSchema },
    handler: async ({ body, principal }) => {
      const v = await requireVolume(principal.projectId, body.volume_id);
      if (body.size_tib !== undefined) {
        if (body.size_tib < v.size_tib) {
          throw badRequest(
            `size_tib can only grow (the volume has ${v.size_tib} TiB); data is never truncated.`,
            'size_tib',
          );
        }
        await resizeVolume(db, v.id, body.size_tib);
      }
      return toVolume((await getVolume(db, principal.projectId, v.id))!);
    },
  });

  router.add({
    method: 'delete',
    path: `${BASE}/:volume_id`,
    operationId: 'deleteClusterVolume',
    summary: 'Delete a shared volume that no cluster uses',
    tags: ['clusters'],
    params: VolumeIdParams,
    errors: [404, 409],
    response: { status: 200, description: 'Deleted', schema: VolumeDeleteSchema },
    handler: async ({ params, principal }) => {
      const v = await requireVolume(principal.projectId, params.volume_id);
      if (v.status === 'bound' || v.cluster_id) {
        throw conflict(
          `Volume '${v.id}' is bound to cluster '${v.cluster_id}'; delete the cluster first.`,
          'volume_bound',
        );
      }
      await deleteVolumeRow(db, v.id);
      return { success: true };
    },
  });
}
