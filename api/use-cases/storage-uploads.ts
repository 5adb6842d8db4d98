/**
 * The write paths of storage uploads (api/routes/storage.ts declares them; the Python CLI's volume
 * uploads): granting an upload to a path, storing a signed PUT of an object or of one part (each
 * attempt its own blob; the part it replaces goes), joining the parts named with their ETags into
 * the object, and dropping an upload with its parts. Uploads whose URLs expired unused go, with
 * their parts, at the project's next grant.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { withTransaction } from '../../db/pool';
import {
  dropPendingStorageObject,
  dropStaleStorageUploads,
  getStorageObject,
  insertStorageUpload,
  listStorageParts,
  recordStoragePart,
  storageObjectUploaded,
} from '../../db/storage-objects';
import { newId } from '../../platform/ids';
import { isSafeVolumePath } from '../../providers/containers/volume-store';
import { deleteScheduledBlobs, discardBlobs } from '../../providers/storage/blob-deletions';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, notFound, payloadTooLarge } from '../errors';
import type { StorageMultipartAbortBody, StorageMultipartCompleteBody } from '../schemas/storage';
import { storeSignedPut } from '../uploads/signed-put';
import { requireStorageRoom } from '../uploads/storage-quota';

type Deps = Pick<ApiDeps, 'db' | 'config' | 'blobs'>;

const usedUpload = (id: string) =>
  new ApiError(
    409,
    `Storage upload '${id}' has its bytes already; ask for a new URL.`,
    'conflict_error',
    null,
    'upload_url_used',
  );

function requirePath(filename: string) {
  if (!isSafeVolumePath(filename))
    throw badRequest(
      `'${filename}' is not a storage path: plain segments separated by '/', none empty, starting with '.' or climbing with '..'.`,
      'filename',
    );
}

/** A new upload to `path` (answers its id); first the project's uploads whose URLs expired unused go, with their parts. */
export async function grantStorageUpload(
  { db, config, blobs }: Deps,
  projectId: string,
  path: string,
): Promise<string> {
  requirePath(path);
  await deleteScheduledBlobs(db, blobs, await dropStaleStorageUploads(db, projectId, config.uploadUrlTtlSeconds + 60));
  const id = newId('sobj', '_');
  await insertStorageUpload(db, { id, projectId, path });
  return id;
}

async function requirePendingUpload({ db }: Pick<ApiDeps, 'db'>, projectId: string, id: string, filename: string) {
  const object = await getStorageObject(db, id);
  if (!object || object.project_id !== projectId || object.path !== filename)
    throw notFound(`No upload '${id}' of '${filename}' in this project.`);
  if (object.uploaded_at) throw usedUpload(id);
  return object;
}

/** Joins the parts the body names, with their ETags, into the object. */
export async function completeStorageParts(
  deps: Deps,
  principal: Principal,
  body: z.infer<typeof StorageMultipartCompleteBody>,
): Promise<void> {
  const { db, config, blobs } = deps;
  const object = await requirePendingUpload(deps, principal.projectId, body.upload_id, body.filename);
  const stored = new Map((await listStorageParts(db, object.id)).map((p) => [p.part_number, p]));
  const named = [...body.parts].sort((a, b) => a.part_number - b.part_number);
  const parts = named.map((n) => {
    const at = `parts[${body.parts.indexOf(n)}]`;
    const part = stored.get(n.part_number);
    if (!part) throw badRequest(`Part ${n.part_number} was not uploaded.`, `${at}.part_number`, 'part_missing');
    if (part.md5 !== n.etag.replace(/"/g, ''))
      throw badRequest(
        `Part ${n.part_number}'s ETag is not the one its upload answered.`,
        `${at}.etag`,
        'etag_mismatch',
      );
    return part;
  });
  const total = parts.reduce((n, p) => n + Number(p.bytes), 0);
  if (total > config.maxUploadBytes)
    throw payloadTooLarge(`A storage object may be at most ${config.maxUploadBytes} bytes.`, 'parts');
  const key = `storage/${object.project_id}/${object.id}-${randomUUID()}`;
  const joined = Readable.from(
    (async function* () {
      for (const p of parts) yield* blobs.read(p.blob_key, undefined, { chunkBytes: 1 << 20 });
    })(),
  );
  const blob = await blobs.put(key, joined, { maxBytes: total });
  const unreachable = await storageObjectUploaded(db, object.id, { bytes: blob.bytes, blobKey: key });
  if (!unreachable) {
    await blobs.delete(key);
    throw usedUpload(object.id);
  }
  await deleteScheduledBlobs(db, blobs, unreachable);
}

/** Drops an upload in parts and the parts uploaded so far. */
export async function abortStorageParts(
  deps: Deps,
  principal: Principal,
  body: z.infer<typeof StorageMultipartAbortBody>,
): Promise<void> {
  const { db, blobs } = deps;
  const object = await requirePendingUpload(deps, principal.projectId, body.upload_id, body.filename);
  await deleteScheduledBlobs(db, blobs, await dropPendingStorageObject(db, object.id));
}

/** Stores the bytes of a signed PUT as the object (once); answers their MD5, its ETag. */
export async function storeStorageObject({ db, config, blobs }: Deps, id: string, declared: number, bytes: Readable) {
  const object = await getStorageObject(db, id);
  if (!object) throw notFound(`Storage upload '${id}' does not exist.`);
  if (object.uploaded_at) throw usedUpload(id);
  await requireStorageRoom(db, config.projectStorageQuotaBytes, object.project_id, declared, 'Content-Length');
  // Each attempt writes its own blob, so a retry never races a slow earlier attempt.
  const key = `storage/${object.project_id}/${id}-${randomUUID()}`;
  const md5 = await storeSignedPut(blobs, bytes, key, declared);
  const unreachable = await storageObjectUploaded(db, id, { bytes: declared, blobKey: key });
  if (!unreachable) {
    await blobs.delete(key);
    throw usedUpload(id);
  }
  await deleteScheduledBlobs(db, blobs, unreachable);
  return md5;
}

/** Stores one part of an upload in parts from its signed PUT; answers its MD5, its ETag. */
export async function storeStoragePart(
  { db, config, blobs }: Deps,
  id: string,
  part: number,
  declared: number,
  bytes: Readable,
) {
  const object = await getStorageObject(db, id);
  if (!object) throw notFound(`Storage upload '${id}' does not exist.`);
  if (object.uploaded_at) throw usedUpload(id);
  await requireStorageRoom(db, config.projectStorageQuotaBytes, object.project_id, declared, 'Content-Length');
  const key = `storage/${object.project_id}/${id}/part-${String(part).padStart(5, '0')}-${randomUUID()}`;
  const md5 = await storeSignedPut(blobs, bytes, key, declared);
  const recorded = await withTransaction(db, (tx) =>
    recordStoragePart(tx, { objectId: id, partNumber: part, blobKey: key, bytes: declared, md5 }),
  );
  if (!recorded) {
    // Completed, aborted or dropped as stale while this part arrived: its blob goes too.
    await discardBlobs(db, blobs, [key]);
    if (!(await getStorageObject(db, id))) throw notFound(`Storage upload '${id}' does not exist.`);
    throw usedUpload(id);
  }
  if (recorded.replaced) await deleteScheduledBlobs(db, blobs, [recorded.replaced]);
  return md5;
}
