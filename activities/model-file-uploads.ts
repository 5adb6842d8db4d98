/**
 * The activity of the modelFileUpload workflow (control queue): when an
 * upload of local weight files runs out of time, it is discarded with what
 * its parts stored, and whatever a `complete` that died half-way wrote of the
 * revision it was making.
 */
import { getRevision } from '../db/models';
import {
  deleteUploadParts,
  expireModelFileUpload,
  getModelFileUpload,
  listUploadFiles,
  listUploadParts,
  type ModelFileUploadRow,
} from '../db/model-file-uploads';
import type { Db, Queryable } from '../db/pool';
import type { BlobStore } from '../providers/storage/blob-store';
import { revisionBlobPrefix } from '../shared/model-file-uploads';

/** Removes the upload's part blobs and rows, and the revision blobs no revision row holds. */
export async function removeUploadedParts(db: Queryable, blobs: BlobStore, upload: ModelFileUploadRow): Promise<void> {
  for (const part of await listUploadParts(db, upload.id)) await blobs.delete(part.blob_key);
  if (!(await getRevision(db, upload.model_id, upload.revision_id))) {
    const prefix = revisionBlobPrefix(upload.model_id, upload.revision_id);
    for (const f of await listUploadFiles(db, upload.id)) await blobs.delete(`${prefix}/${f.path}`);
  }
  await deleteUploadParts(db, upload.id);
}

export function createModelFileUploadActivities({ db, blobs }: { db: Db; blobs: BlobStore }) {
  return {
    /** Discards an upload whose time ran out; or says how a `complete` that came first ended it. */
    async discardExpiredModelFileUpload({
      uploadId,
    }: {
      uploadId: string;
    }): Promise<'COMPLETED' | 'FAILED' | 'DISCARDED'> {
      const state = await expireModelFileUpload(db, uploadId);
      if (state === 'completed') return 'COMPLETED';
      if (state === 'failed') return 'FAILED';
      // Retried with back-off until the `complete` ends it, or an hour passes (the API died in it).
      if (state === 'completing') throw new Error(`upload ${uploadId} is being completed; waiting for it to end`);
      const upload = await getModelFileUpload(db, uploadId);
      if (upload) await removeUploadedParts(db, blobs, upload);
      return 'DISCARDED';
    },
  };
}

export type ModelFileUploadActivities = ReturnType<typeof createModelFileUploadActivities>;
