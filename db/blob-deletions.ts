/** The blob_deletions table (migration 034): keys of blobs to delete, written with the rows' removal. */
import type { Queryable } from './pool';

/**
 * Records that these blobs are to be deleted; called in the transaction that removes the rows
 * naming them, so that the keys outlive the rows whatever happens next.
 */
export async function scheduleBlobDeletions(db: Queryable, keys: string[]): Promise<void> {
  if (!keys.length) return;
  await db.query('INSERT INTO blob_deletions (key) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [keys]);
}

/** The keys still to delete, those recorded (or last refused) longest ago first. */
export async function scheduledBlobDeletions(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ key: string }>(
    'SELECT key FROM blob_deletions ORDER BY scheduled_at, key LIMIT $1',
    [limit],
  );
  return rows.map((r) => r.key);
}

/**
 * Takes a key to delete its blob: true when it was still recorded. In the transaction that deletes
 * the blob, which holds the key's row until then: a writer reclaiming the key waits for it.
 */
export async function takeBlobDeletion(tx: Queryable, key: string): Promise<boolean> {
  const { rowCount } = await tx.query('DELETE FROM blob_deletions WHERE key = $1', [key]);
  return Boolean(rowCount);
}

/** A key whose blob storage refused to delete goes to the back, behind keys not yet tried. */
export async function postponeBlobDeletion(db: Queryable, key: string): Promise<void> {
  await db.query('UPDATE blob_deletions SET scheduled_at = now() WHERE key = $1', [key]);
}

/**
 * Takes keys back from deletion, before a blob is written under a key that may have been recorded:
 * one derived from ids rather than drawn afresh (a retried registration of a fine-tune's weights
 * writes the same keys again). Waits for a delete of one of them under way.
 */
export async function reclaimBlobKeys(db: Queryable, keys: string[]): Promise<void> {
  if (!keys.length) return;
  await db.query('DELETE FROM blob_deletions WHERE key = ANY($1::text[])', [keys]);
}
