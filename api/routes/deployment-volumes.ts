/**
 * Deployment volumes (SDK beta.jig.volumes, `/deployments/storage/volumes`):
 * read-only content for replicas, made of files uploaded through the Files API
 * whose names start with `source_prefix`. Every create or content change is a
 * new version with its file list fixed at that moment; deployments pin the
 * version they mount (the current one when they were deployed or updated).
 */
import { DeletedResponse, IdParams } from '../schemas/common';
import { newId } from '../../platform/ids';
import {
  addVolumeVersion,
  contentOfNewVersion,
  deleteVolume,
  filesWithPrefix,
  getVolume,
  getVolumeVersion,
  insertVolume,
  listVolumeVersions,
  listVolumes,
  renameVolume,
  volumeMounts,
  type VolumeFile,
  type VolumeRow,
} from '../../db/deployment-volumes';
import { withTransaction, type Db, type Queryable } from '../../db/pool';
import { dropUnheldStorageObjects } from '../../db/storage-objects';
import { isSafeVolumePath } from '../../providers/containers/volume-store';
import { deleteScheduledBlobs } from '../../providers/storage/blob-deletions';
import { cursorPage, decodeCursor, encodeCursor, WholeListPageQuery } from '../cursor-pages';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CreateDeploymentVolumeBody,
  DeploymentVolumeListSchema,
  GetDeploymentVolumeQuery,
  UpdateDeploymentVolumeBody,
  DeploymentVolumeSchema,
} from '../schemas/deployments';
import { toDeploymentVolume } from '../presenters/deployment-volumes';

/**
 * The project's uploaded files under the prefix, each a safe path inside the volume. In the
 * transaction that makes the version: its storage objects cannot be dropped until it commits.
 */
async function resolveContent(tx: Queryable, projectId: string, prefix: string): Promise<VolumeFile[]> {
  const files = await contentOfNewVersion(tx, projectId, prefix);
  const unsafe = files.find((f) => !isSafeVolumePath(f.name));
  if (unsafe) {
    throw badRequest(
      `File '${unsafe.file_id}' is named ${JSON.stringify(unsafe.name)}, which cannot be a path inside a volume (plain segments separated by '/', none starting with '.' or climbing with '..'). Narrow source_prefix or rename the upload.`,
      'content.source_prefix',
    );
  }
  return files;
}

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
  async function requireVolume(projectId: string, id: string) {
    const v = await getVolume(db, projectId, id);
    if (!v) throw notFound(`Volume '${id}' not found.`);
    return v;
  }
  async function refuseIfMounted(v: VolumeRow, action: string) {
    const mounts = await volumeMounts(db, v.project_id, v.name);
    if (mounts.length) {
      throw conflict(
        `Volume '${v.name}' is mounted by ${[...new Set(mounts.map((m) => m.deployment_id))].join(', ')}; remove it from those deployments before you ${action} it.`,
        'volume_in_use',
      );
    }
  }

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
      if (await getVolume(db, principal.projectId, body.name))
        throw conflict(`A volume named '${body.name}' exists in this project.`, 'volume_exists');
      const id = newId('vol');
      await withTransaction(db, async (tx) => {
        const files = await resolveContent(tx, principal.projectId, body.content.source_prefix);
        await insertVolume(tx, {
          id,
          projectId: principal.projectId,
          name: body.name,
          sourcePrefix: body.content.source_prefix,
          files,
        });
      });
      return present(db, (await getVolume(db, principal.projectId, id))!);
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
      if (body.name && body.name !== v.name) {
        // Deployments name the volumes they mount: a rename would cut them off.
        await refuseIfMounted(v, 'rename');
        if (await getVolume(db, principal.projectId, body.name))
          throw conflict(`A volume named '${body.name}' exists in this project.`, 'volume_exists');
        await renameVolume(db, v.id, body.name);
      }
      if (body.content) {
        const prefix = body.content.source_prefix;
        await withTransaction(db, async (tx) =>
          addVolumeVersion(tx, v.id, prefix, await resolveContent(tx, principal.projectId, prefix)),
        );
      }
      return present(db, (await getVolume(db, principal.projectId, v.id))!);
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
      await refuseIfMounted(v, 'delete');
      const prefixes = (await listVolumeVersions(db, v.id)).map((x) => x.source_prefix);
      const unheld = await withTransaction(db, async (tx) => {
        await deleteVolume(tx, v.id);
        // What the CLI uploaded for this volume goes with it, unless another volume holds it.
        return dropUnheldStorageObjects(tx, v.project_id, prefixes);
      });
      await deleteScheduledBlobs(db, deps.blobs, unheld);
      return { id: v.id, deleted: true as const };
    },
  });
}
