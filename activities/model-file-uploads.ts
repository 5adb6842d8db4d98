/**
 * The activity of the modelFileUpload workflow (control queue): when an
 * upload of local weight files runs out of time, it is discarded with what
 * its parts stored, and whatever a `complete` that died half-way wrote of the
 * revision it was making.
 */
import { dropUploadLeftovers, expireModelFileUpload, getModelFileUpload } from '../db/model-file-uploads';
import type { Db } from '../db/pool';
import { deleteScheduledBlobs } from '../providers/storage/blob-deletions';
import type { BlobStore } from '../providers/storage/blob-store';

export function createModelFileUploadActivities({ db, blobs }: { db: Db; blobs: BlobStore }) {
  return {
    /** Discards an upload whose time ran out; or says how a `complete` that came first ended it. */
    async discardExpiredModelFileUpload({
      uploadId,
    }: {
      uploadId: string;
    }): Promise<'COMPLETED' | 'FAILED' | 'DISCARDED'> {
      const state = await expireModelFileUpload(db, uploadId);
      // Retried with back-off until the `complete` ends it, or its hold lapses (the API died in it).
      if (state === 'completing') throw new Error(`upload ${uploadId} is being completed; waiting for it to end`);
      // Whatever ended it, what it left goes: a `complete` that died after its revision was written
      // left its parts.
      const upload = await getModelFileUpload(db, uploadId);
      if (upload) await deleteScheduledBlobs(db, blobs, await dropUploadLeftovers(db, upload));
      if (state === 'completed') return 'COMPLETED';
      if (state === 'failed') return 'FAILED';
      return 'DISCARDED';
    },
  };
}

export type ModelFileUploadActivities = ReturnType<typeof createModelFileUploadActivities>;
