/**
 * The write paths of deployment volumes (SDK beta.jig.volumes): create one from the project's
 * uploaded files under a prefix (version 1), rename it or give it new content (a new version),
 * and delete it with the storage objects no other volume holds. A mounted volume is neither
 * renamed nor deleted: deployments name the volumes they mount.
 */
import type { Principal } from '../../db/accounts';
import {
  addVolumeVersion,
  contentOfNewVersion,
  deleteVolume,
  getVolume,
  insertVolume,
  listVolumeVersions,
  renameVolume,
  volumeMounts,
  type VolumeFile,
  type VolumeRow,
} from '../../db/deployment-volumes';
import { withTransaction, type Queryable } from '../../db/pool';
import { dropUnheldStorageObjects } from '../../db/storage-objects';
import { newId } from '../../platform/ids';
import { isSafeVolumePath } from '../../providers/containers/volume-store';
import { deleteScheduledBlobs } from '../../providers/storage/blob-deletions';
import type { ApiDeps } from '../deps';
import { badRequest, conflict, notFound } from '../errors';

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

export async function requireDeploymentVolume(db: Queryable, projectId: string, id: string): Promise<VolumeRow> {
  const v = await getVolume(db, projectId, id);
  if (!v) throw notFound(`Volume '${id}' not found.`);
  return v;
}

async function refuseIfMounted(db: Queryable, v: VolumeRow, action: string) {
  const mounts = await volumeMounts(db, v.project_id, v.name);
  if (mounts.length) {
    throw conflict(
      `Volume '${v.name}' is mounted by ${[...new Set(mounts.map((m) => m.deployment_id))].join(', ')}; remove it from those deployments before you ${action} it.`,
      'volume_in_use',
    );
  }
}

async function refuseTakenName(db: Queryable, projectId: string, name: string) {
  if (await getVolume(db, projectId, name))
    throw conflict(`A volume named '${name}' exists in this project.`, 'volume_exists');
}

/** A new volume, version 1, holding the project's uploaded files under `sourcePrefix` now. */
export async function createDeploymentVolume(
  { db }: Pick<ApiDeps, 'db'>,
  principal: Principal,
  body: { name: string; content: { source_prefix: string } },
): Promise<VolumeRow> {
  await refuseTakenName(db, principal.projectId, body.name);
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
  return (await getVolume(db, principal.projectId, id))!;
}

/** A rename (refused while mounted), and/or new content as a new version (deployments keep theirs until updated). */
export async function changeDeploymentVolume(
  { db }: Pick<ApiDeps, 'db'>,
  principal: Principal,
  v: VolumeRow,
  body: { name?: string; content?: { source_prefix: string } },
): Promise<VolumeRow> {
  if (body.name && body.name !== v.name) {
    await refuseIfMounted(db, v, 'rename');
    await refuseTakenName(db, principal.projectId, body.name);
    await renameVolume(db, v.id, body.name);
  }
  if (body.content) {
    const prefix = body.content.source_prefix;
    await withTransaction(db, async (tx) =>
      addVolumeVersion(tx, v.id, prefix, await resolveContent(tx, principal.projectId, prefix)),
    );
  }
  return (await getVolume(db, principal.projectId, v.id))!;
}

/** Deletes a volume no deployment mounts; what the CLI uploaded for it goes too, unless another volume holds it. */
export async function deleteDeploymentVolume(
  { db, blobs }: Pick<ApiDeps, 'db' | 'blobs'>,
  v: VolumeRow,
): Promise<void> {
  await refuseIfMounted(db, v, 'delete');
  const prefixes = (await listVolumeVersions(db, v.id)).map((x) => x.source_prefix);
  const unheld = await withTransaction(db, async (tx) => {
    await deleteVolume(tx, v.id);
    return dropUnheldStorageObjects(tx, v.project_id, prefixes);
  });
  await deleteScheduledBlobs(db, blobs, unheld);
}
