/** Storage objects (`/v1/storage/*`, the Python CLI's volume uploads): see migration 032. */
import { scheduleBlobDeletions } from './blob-deletions';
import { withTransaction, type Db, type Queryable } from './pool';

export interface StorageObjectRow {
  id: string;
  project_id: string;
  path: string;
  blob_key: string | null;
  bytes: string | null;
  uploaded_at: Date | null;
}

/**
 * Takes turns, per project, between what decides whether a storage object is held: a volume
 * version taking the project's objects as its content (db/deployment-volumes.ts), and an upload's
 * arrival or a volume's delete dropping the objects no version holds. Without it, a version made
 * while a newer upload of one of its paths arrived could name the object that upload dropped, and
 * mount a file whose blob is gone. In the transaction; held until it ends.
 */
export async function lockProjectStorageObjects(tx: Queryable, projectId: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`storage-objects/${projectId}`]);
}

/** An upload granted to `path`: its row, without bytes yet. */
export async function insertStorageUpload(db: Queryable, o: { id: string; projectId: string; path: string }) {
  await db.query('INSERT INTO storage_objects (id, project_id, path) VALUES ($1, $2, $3)', [o.id, o.projectId, o.path]);
}

export async function getStorageObject(db: Queryable, id: string): Promise<StorageObjectRow | null> {
  const { rows } = await db.query<StorageObjectRow>('SELECT * FROM storage_objects WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/**
 * The bytes of the upload arrived: it becomes the path's object, in one transaction with what that
 * makes unreachable: the path's earlier uploads that no volume version holds, and the parts the
 * bytes were joined from (a process that dies half-way leaves neither a superseded object nor parts
 * that still count in the quota). Answers those rows' blobs, recorded for deletion
 * (db/blob-deletions.ts) for the caller to delete; null when the upload had already arrived (a
 * second PUT to a single-use URL, a second `complete`).
 */
export async function storageObjectUploaded(
  db: Db,
  id: string,
  stored: { bytes: number; blobKey: string },
): Promise<string[] | null> {
  return withTransaction(db, async (tx) => {
    const { rows } = await tx.query<{ project_id: string; path: string }>(
      `UPDATE storage_objects SET bytes = $2, blob_key = $3, uploaded_at = clock_timestamp()
        WHERE id = $1 AND uploaded_at IS NULL RETURNING project_id, path`,
      [id, stored.bytes, stored.blobKey],
    );
    if (!rows[0]) return null;
    await lockProjectStorageObjects(tx, rows[0].project_id);
    const { rows: gone } = await tx.query<{ blob_key: string }>(
      `DELETE FROM storage_objects o
        WHERE o.project_id = $1 AND o.path = $2 AND o.id <> $3 AND o.uploaded_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM deployment_volume_versions v
                           WHERE v.files @> jsonb_build_array(jsonb_build_object('file_id', o.id)))
        RETURNING o.blob_key`,
      [rows[0].project_id, rows[0].path, id],
    );
    const keys = gone.map((r) => r.blob_key);
    await scheduleBlobDeletions(tx, keys);
    return [...keys, ...(await dropStorageParts(tx, id))];
  });
}

export interface StoragePartRow {
  part_number: number;
  blob_key: string;
  bytes: string;
  md5: string;
}

/**
 * Records a stored part while its upload waits for its bytes (a retry replaces the earlier
 * attempt); answers the blob it replaced, recorded for deletion, or null. Null instead of an
 * answer: the upload has its bytes, or is gone. As files' recordPart (db/files.ts): under the
 * upload's row lock, in a transaction, so a part sent twice at once names the blob it replaced.
 */
export async function recordStoragePart(
  tx: Queryable,
  p: { objectId: string; partNumber: number; blobKey: string; bytes: number; md5: string },
): Promise<{ replaced: string | null } | null> {
  const { rows } = await tx.query<{ uploaded_at: Date | null }>(
    'SELECT uploaded_at FROM storage_objects WHERE id = $1 FOR UPDATE',
    [p.objectId],
  );
  if (!rows[0] || rows[0].uploaded_at) return null;
  const previous = await tx.query<{ blob_key: string }>(
    'SELECT blob_key FROM storage_object_parts WHERE object_id = $1 AND part_number = $2',
    [p.objectId, p.partNumber],
  );
  await tx.query(
    `INSERT INTO storage_object_parts (object_id, part_number, blob_key, bytes, md5) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (object_id, part_number) DO UPDATE SET blob_key = $3, bytes = $4, md5 = $5`,
    [p.objectId, p.partNumber, p.blobKey, p.bytes, p.md5],
  );
  const replaced = previous.rows[0]?.blob_key ?? null;
  if (replaced) await scheduleBlobDeletions(tx, [replaced]);
  return { replaced };
}

export async function listStorageParts(db: Queryable, objectId: string): Promise<StoragePartRow[]> {
  const { rows } = await db.query<StoragePartRow>(
    'SELECT part_number, blob_key, bytes, md5 FROM storage_object_parts WHERE object_id = $1 ORDER BY part_number',
    [objectId],
  );
  return rows;
}

/** Drops the parts of an object (joined, or abandoned); answers their blobs, recorded for deletion. In a transaction. */
export async function dropStorageParts(tx: Queryable, objectId: string): Promise<string[]> {
  const { rows } = await tx.query<{ blob_key: string }>(
    'DELETE FROM storage_object_parts WHERE object_id = $1 RETURNING blob_key',
    [objectId],
  );
  const keys = rows.map((r) => r.blob_key);
  await scheduleBlobDeletions(tx, keys);
  return keys;
}

/** Drops a granted upload whose bytes never arrived (an aborted one); answers its parts' blobs, recorded for deletion. */
export async function dropPendingStorageObject(db: Db, objectId: string): Promise<string[]> {
  return withTransaction(db, async (tx) => {
    await tx.query('SELECT 1 FROM storage_objects WHERE id = $1 FOR UPDATE', [objectId]);
    const parts = await dropStorageParts(tx, objectId);
    await tx.query('DELETE FROM storage_objects WHERE id = $1 AND uploaded_at IS NULL', [objectId]);
    return parts;
  });
}

/**
 * Uploads of the project granted more than `olderThanSeconds` ago whose bytes never arrived: their
 * rows go, and the blobs of their parts are recorded and answered for deletion (no upload leaves
 * parts behind).
 */
export async function dropStaleStorageUploads(db: Db, projectId: string, olderThanSeconds: number): Promise<string[]> {
  return withTransaction(db, async (tx) => {
    // Locked first, then their parts read in a statement of their own: a part being recorded
    // (recordStoragePart holds the upload's row) is committed by then, and its blob is counted.
    const { rows: stale } = await tx.query<{ id: string }>(
      `SELECT id FROM storage_objects WHERE project_id = $1 AND uploaded_at IS NULL
          AND created_at < now() - make_interval(secs => $2) FOR UPDATE`,
      [projectId, olderThanSeconds],
    );
    if (!stale.length) return [];
    const ids = stale.map((r) => r.id);
    const { rows } = await tx.query<{ blob_key: string }>(
      'SELECT blob_key FROM storage_object_parts WHERE object_id = ANY($1::text[])',
      [ids],
    );
    await tx.query('DELETE FROM storage_objects WHERE id = ANY($1::text[])', [ids]);
    const keys = rows.map((r) => r.blob_key);
    await scheduleBlobDeletions(tx, keys);
    return keys;
  });
}

/**
 * After a volume is deleted: the project's storage objects in the directories its versions named
 * that no remaining version holds, nor an unfilled one could still take, go. Answers their blobs,
 * recorded for deletion. In the transaction that deletes the volume.
 */
export async function dropUnheldStorageObjects(
  db: Queryable,
  projectId: string,
  prefixes: string[],
): Promise<string[]> {
  const directories = prefixes.map((p) => `${p.replace(/\/+$/, '')}/`).filter((d) => d !== '/');
  if (!directories.length) return [];
  await lockProjectStorageObjects(db, projectId);
  const { rows } = await db.query<{ blob_key: string | null }>(
    `DELETE FROM storage_objects o
      WHERE o.project_id = $1 AND o.uploaded_at IS NOT NULL
        AND EXISTS (SELECT 1 FROM unnest($2::text[]) d WHERE starts_with(o.path, d))
        AND NOT EXISTS (
          SELECT 1 FROM deployment_volume_versions v JOIN deployment_volumes dv ON dv.id = v.volume_id
           WHERE dv.project_id = $1
             AND (v.files @> jsonb_build_array(jsonb_build_object('file_id', o.id))
                  OR (v.files = '[]'::jsonb AND starts_with(o.path, rtrim(v.source_prefix, '/') || '/'))))
      RETURNING o.blob_key`,
    [projectId, directories],
  );
  const keys = rows.map((r) => r.blob_key).filter((k): k is string => k !== null);
  await scheduleBlobDeletions(db, keys);
  return keys;
}
