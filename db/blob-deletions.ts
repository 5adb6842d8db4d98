/** The blob_deletions table (migration 034): keys of blobs to delete, written with the rows' removal. */
import type { Queryable } from './pool';

/**
 * Records that these blobs are to be deleted; called in the transaction that removes the rows
 * naming them, so that the keys outlive the rows whatever happens next. Keys are never reused
 * (each names one file, part or upload attempt), so a key recorded here never names a new blob.
 */
export async function scheduleBlobDeletions(db: Queryable, keys: string[]): Promise<void> {
  if (!keys.length) return;
  await db.query('INSERT INTO blob_deletions (key) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [keys]);
}

/** The oldest keys still to delete. */
export async function scheduledBlobDeletions(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ key: string }>(
    'SELECT key FROM blob_deletions ORDER BY scheduled_at, key LIMIT $1',
    [limit],
  );
  return rows.map((r) => r.key);
}

/** Forgets keys whose blobs are deleted. */
export async function forgetBlobDeletions(db: Queryable, keys: string[]): Promise<void> {
  if (!keys.length) return;
  await db.query('DELETE FROM blob_deletions WHERE key = ANY($1::text[])', [keys]);
}
