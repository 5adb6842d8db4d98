/**
 * Shared storage volumes for clusters (`/compute/clusters/storage/volumes`,
 * the SDK's beta.clusters.storage): create (provisioned by the workflow
 * volume/<id>), list, get, resize (PUT, grow only), delete (not while bound).
 */
import { listVolumes } from '../../db/clusters';
import { toVolume } from '../presenters/clusters';
import type { ApiDeps } from '../deps';
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
import { createVolume, deleteVolume, growVolume, requireVolume } from '../use-cases/cluster-storage';

export function addClusterStorageRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;
  const BASE = '/compute/clusters/storage/volumes';

  router.add({
    method: 'post',
    path: BASE,
    operationId: 'createClusterVolume',
    summary: 'Create a shared volume for clusters in a region',
    tags: ['clusters'],
    body: CreateVolumeBody,
    errors: [503],
    response: { status: 200, description: 'The volume, provisioning', schema: VolumeSchema },
    handler: async ({ body, principal }) => toVolume(await createVolume(deps, principal, body)),
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
    handler: async ({ params, principal }) => toVolume(await requireVolume(db, principal.projectId, params.volume_id)),
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
    handler: async ({ body, principal }) => toVolume(await growVolume(db, principal, body)),
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
      await deleteVolume(db, principal, params.volume_id);
      return { success: true };
    },
  });
}
