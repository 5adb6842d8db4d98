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
 *
 * A blob is deleted only inside a transaction that removes its key's row, so each recorded key is
 * deleted once, and a writer that takes a key back before writing under it (reclaimBlobKeys) waits
 * for a delete under way instead of seeing its new blob deleted after it.
 */
import type { Logger } from 'pino';
import {
  postponeBlobDeletion,
  scheduleBlobDeletions,
  scheduledBlobDeletions,
  takeBlobDeletion,
} from '../../db/blob-deletions';
import { withTransaction, type Db } from '../../db/pool';
import { repeat, type Repeating } from '../../platform/repeat';
import type { BlobStore } from './blob-store';

/** Keys a retry round takes at most; the rest wait for the next round. */
const RETRY_BATCH = 500;
/** Refused keys a log line names; the rest are counted. */
const LOGGED_FAILURES = 10;

export interface BlobDeletionOutcome {
  deleted: string[];
  /** Keys whose delete failed: still recorded, behind the others, for the next retry round. */
  failed: Array<{ key: string; error: string }>;
}

/**
 * Deletes the blobs of recorded keys (one already taken, by a retry round or a writer that
 * reclaimed it, is skipped). Never throws for a blob: the rows are already gone, so the caller's
 * work is done whatever storage says, and a refused key stays recorded for the retries.
 */
export async function deleteScheduledBlobs(db: Db, blobs: BlobStore, keys: string[]): Promise<BlobDeletionOutcome> {
  const outcome: BlobDeletionOutcome = { deleted: [], failed: [] };
  for (const key of keys) {
    try {
      const taken = await withTransaction(db, async (tx) => {
        if (!(await takeBlobDeletion(tx, key))) return false;
        await blobs.delete(key); // a refusal rolls the take back
        return true;
      });
      if (taken) outcome.deleted.push(key);
    } catch (err) {
      outcome.failed.push({ key, error: (err as Error).message });
      await postponeBlobDeletion(db, key).catch(() => undefined); // the next round retries it anyway
    }
  }
  return outcome;
}

/**
 * Deletes blobs no row names, outside a transaction that removed rows: what a request wrote before
 * it found its row gone. Recorded first, so that a refusal leaves them to the retry rounds.
 */
export async function discardBlobs(db: Db, blobs: BlobStore, keys: string[]): Promise<BlobDeletionOutcome> {
  await scheduleBlobDeletions(db, keys);
  return deleteScheduledBlobs(db, blobs, keys);
}

/** One retry round: the keys recorded longest ago, deleted. */
export async function retryBlobDeletions(db: Db, blobs: BlobStore): Promise<BlobDeletionOutcome> {
  return deleteScheduledBlobs(db, blobs, await scheduledBlobDeletions(db, RETRY_BATCH));
}

/** The control worker's retry rounds, every `everySeconds`. */
export function startBlobDeletionRetries(opts: {
  db: Db;
  blobs: BlobStore;
  everySeconds: number;
  logger: Logger;
}): Repeating {
  const { db, blobs, logger } = opts;
  return repeat(
    async () => {
      const { deleted, failed } = await retryBlobDeletions(db, blobs);
      if (deleted.length) logger.info({ deleted: deleted.length }, 'deleted blobs left behind by earlier deletes');
      if (failed.length) {
        logger.warn(
          { refused: failed.length, first: failed.slice(0, LOGGED_FAILURES) },
          'blobs not deleted yet (the next round tries again)',
        );
      }
    },
    opts.everySeconds * 1000,
    (err) => logger.warn({ err: err.message }, 'blob deletions not retried this time'),
  );
}
