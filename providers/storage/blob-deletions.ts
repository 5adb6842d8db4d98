/**
 * Deleting blobs once the rows that name them are gone, without leaving any behind.
 *
 * A blob lives outside PostgreSQL, so no transaction covers both the row and the blob. Deleting
 * the blob first can lose one a racing request has just made live (a multipart `complete` against
 * the discard of its upload). Deleting the row first and the blob after left the blob on disk for
 * good whenever the process died, or storage refused, in between: nothing named it any more. So:
 *
 *   1. the transaction that removes the rows records their blobs' keys (scheduleBlobDeletions,
 *      db/blob-deletions.ts);
 *   2. right after it commits, the blobs are deleted and their keys forgotten (deleteScheduledBlobs);
 *   3. what is still recorded, the control worker deletes every GANTRY_BLOB_DELETION_RETRY_SECONDS
 *      (startBlobDeletionRetries).
 */
import type { Logger } from 'pino';
import { forgetBlobDeletions, scheduledBlobDeletions } from '../../db/blob-deletions';
import type { Queryable } from '../../db/pool';
import { repeat, type Repeating } from '../../platform/repeat';
import type { BlobStore } from './blob-store';

/** Keys a retry round takes at most; the rest wait for the next round. */
const RETRY_BATCH = 500;

export interface BlobDeletionOutcome {
  deleted: string[];
  /** Keys whose delete failed: still recorded, for the next retry round. */
  failed: Array<{ key: string; error: string }>;
}

/**
 * Deletes blobs whose keys were recorded, and forgets those it deleted. Never throws for a blob:
 * the rows are already gone, so the caller's work is done whatever storage says, and a failed key
 * stays recorded for the retries.
 */
export async function deleteScheduledBlobs(
  db: Queryable,
  blobs: BlobStore,
  keys: string[],
): Promise<BlobDeletionOutcome> {
  const outcome: BlobDeletionOutcome = { deleted: [], failed: [] };
  for (const key of keys) {
    try {
      await blobs.delete(key);
      outcome.deleted.push(key);
    } catch (err) {
      outcome.failed.push({ key, error: (err as Error).message });
    }
  }
  await forgetBlobDeletions(db, outcome.deleted);
  return outcome;
}

/** One retry round: the oldest recorded keys, deleted. */
export async function retryBlobDeletions(db: Queryable, blobs: BlobStore): Promise<BlobDeletionOutcome> {
  return deleteScheduledBlobs(db, blobs, await scheduledBlobDeletions(db, RETRY_BATCH));
}

/** The control worker's retry rounds, every `everySeconds`. */
export function startBlobDeletionRetries(opts: {
  db: Queryable;
  blobs: BlobStore;
  everySeconds: number;
  logger: Logger;
}): Repeating {
  const { db, blobs, logger } = opts;
  return repeat(
    async () => {
      const { deleted, failed } = await retryBlobDeletions(db, blobs);
      if (deleted.length) logger.info({ deleted: deleted.length }, 'deleted blobs left behind by earlier deletes');
      if (failed.length) logger.warn({ failed }, 'blobs not deleted yet (the next round tries again)');
    },
    opts.everySeconds * 1000,
    (err) => logger.warn({ err: err.message }, 'blob deletions not retried this time'),
  );
}
