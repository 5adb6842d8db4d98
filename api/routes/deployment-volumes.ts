/**
 * Deployment volumes (SDK beta.jig.volumes, `/deployments/storage/volumes`):
 * read-only content for replicas, made of files uploaded through the Files API
 * whose names start with `source_prefix`. Every create or content change is a
 * new version with its file list fixed at that moment; deployments pin the
 * version they mount (the current one when they were deployed or updated).
 */
import { DeletedResponse, IdParams } from '../schemas/common';
import {
  filesWithPrefix,
  getVolumeVersion,
  listVolumeVersions,
  listVolumes,
  volumeMounts,
  type VolumeRow,
} from '../../db/deployment-volumes';
import type { Db } from '../../db/pool';
import { cursorPage, decodeCursor, encodeCursor, WholeListPageQuery } from '../cursor-pages';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CreateDeploymentVolumeBody,
  DeploymentVolumeListSchema,
  GetDeploymentVolumeQuery,
  UpdateDeploymentVolumeBody,
  DeploymentVolumeSchema,
} from '../schemas/deployments';
import { toDeploymentVolume } from '../presenters/deployment-volumes';
import {
  changeDeploymentVolume,
  createDeploymentVolume,
  deleteDeploymentVolume,
  requireDeploymentVolume,
} from '../use-cases/deployment-volumes';

/** The volume as shown: the version asked for (or the current one) with its files, and every version's mounts. */
async function present(db: Db, v: VolumeRow, version?: number) {
  const [versions, mounts] = await Promise.all([listVolumeVersions(db, v.id), volumeMounts(db, v.project_id, v.name)]);
  const shown = versions.find((x) => x.version === (version ?? v.current_version))!;
  // A version made before its files arrived shows what it would take now (it is filled when first mounted).
  if (!shown.files.length) shown.files = await filesWithPrefix(db, v.project_id, shown.source_prefix);
  return toDeploymentVolume(v, shown, versions, mounts);
}

export function addDeploymentVolumeRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;
  const requireVolume = (projectId: string, id: string) => requireDeploymentVolume(db, projectId, id);

  router.add({
    method: 'post',
    path: '/deployments/storage/volumes',
    operationId: 'createDeploymentVolume',
    summary: 'Create a read-only volume from uploaded files whose names start with source_prefix',
    tags: ['deployments'],
    body: CreateDeploymentVolumeBody,
    errors: [409],
    response: { status: 200, description: 'The volume (version 1)', schema: DeploymentVolumeSchema },
    handler: async ({ body, principal }) => {
      return present(db, await createDeploymentVolume(deps, principal, body));
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/storage/volumes',
    operationId: 'listDeploymentVolumes',
    summary: "The project's volumes, oldest first, by cursor (unasked, a page of up to 1000)",
    tags: ['deployments'],
    query: WholeListPageQuery,
    response: {
      status: 200,
      description: 'Volumes',
      schema: DeploymentVolumeListSchema,
    },
    handler: async ({ principal, query }) => {
      const rows = await listVolumes(db, principal.projectId, decodeCursor(query.after), query.limit + 1);
      return cursorPage(rows, query.limit, encodeCursor, (v) => present(db, v));
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/storage/volumes/:id',
    operationId: 'getDeploymentVolume',
    summary: 'A volume by id or name; `version` describes an earlier version',
    tags: ['deployments'],
    params: IdParams,
    query: GetDeploymentVolumeQuery,
    errors: [404],
    response: { status: 200, description: 'The volume', schema: DeploymentVolumeSchema },
    handler: async ({ params, query, principal }) => {
      const v = await requireVolume(principal.projectId, params.id);
      if (query.version && !(await getVolumeVersion(db, v.id, query.version)))
        throw notFound(`Volume '${v.name}' has no version ${query.version}.`);
      return present(db, v, query.version);
    },
  });
  router.add({
    method: 'patch',
    path: '/deployments/storage/volumes/:id',
    operationId: 'updateDeploymentVolume',
    summary: 'Rename a volume, or give it new content (a new version; deployments keep theirs until updated)',
    tags: ['deployments'],
    params: IdParams,
    body: UpdateDeploymentVolumeBody,
    errors: [404, 409],
    response: { status: 200, description: 'The volume', schema: DeploymentVolumeSchema },
    handler: async ({ params, body, principal }) => {
      const v = await requireVolume(principal.projectId, params.id);
      return present(db, await changeDeploymentVolume(deps, principal, v, body));
    },
  });
  router.add({
    method: 'delete',
    path: '/deployments/storage/volumes/:id',
    operationId: 'deleteDeploymentVolume',
    summary: 'Delete a volume that no deployment mounts (its files become deletable again; its storage objects go)',
    tags: ['deployments'],
    params: IdParams,
    errors: [404, 409],
    response: { status: 200, description: 'Deleted', schema: DeletedResponse },
    handler: async ({ params, principal }) => {
      const v = await requireVolume(principal.projectId, params.id);
      await deleteDeploymentVolume(deps, v);
      return { id: v.id, deleted: true as const };
    },
  });
}
