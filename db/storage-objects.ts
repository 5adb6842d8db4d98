/** Storage objects (`/v1/storage/*`, the Python CLI's volume uploads): see migration 032. */
import { withTransaction, type Db, type Queryable } from './pool';

export interface StorageObjectRow {
  id: string;
  project_id: string;
  path: string;
  blob_key: string | null;
  bytes: string | null;
  uploaded_at: Date | null;
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
 * that still count in the quota). Answers those rows' blobs, for the caller to delete; null when the
 * upload had already arrived (a second PUT to a single-use URL, a second `complete`).
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
    const { rows: gone } = await tx.query<{ blob_key: string }>(
      `DELETE FROM storage_objects o
        WHERE o.project_id = $1 AND o.path = $2 AND o.id <> $3 AND o.uploaded_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM deployment_volume_versions v
                           WHERE v.files @> jsonb_build_array(jsonb_build_object('file_id', o.id)))
        RETURNING o.blob_key`,
      [rows[0].project_id, rows[0].path, id],
    );
    return [...gone.map((r) => r.blob_key), ...(await dropStorageParts(tx, id))];
  });
}

export interface StoragePartRow {
  part_number: number;
  blob_key: string;
  bytes: string;
  md5: string;
}

/** Records a stored part; answers the blob of the attempt it replaced, if any. */
export async function recordStoragePart(
  db: Queryable,
  p: { objectId: string; partNumber: number; blobKey: string; bytes: number; md5: string },
): Promise<{ replaced: string | null }> {
  const { rows } = await db.query<{ replaced: string | null }>(
    `WITH old AS (SELECT blob_key FROM storage_object_parts WHERE object_id = $1 AND part_number = $2)
     INSERT INTO storage_object_parts (object_id, part_number, blob_key, bytes, md5) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (object_id, part_number) DO UPDATE SET blob_key = $3, bytes = $4, md5 = $5
     RETURNING (SELECT blob_key FROM old) AS replaced`,
    [p.objectId, p.partNumber, p.blobKey, p.bytes, p.md5],
  );
  return { replaced: rows[0].replaced };
}

export async function listStorageParts(db: Queryable, objectId: string): Promise<StoragePartRow[]> {
  const { rows } = await db.query<StoragePartRow>(
    'SELECT part_number, blob_key, bytes, md5 FROM storage_object_parts WHERE object_id = $1 ORDER BY part_number',
    [objectId],
  );
  return rows;
}

/** Drops the parts of an object (joined, or abandoned); answers their blobs. */
export async function dropStorageParts(db: Queryable, objectId: string): Promise<string[]> {
  const { rows } = await db.query<{ blob_key: string }>(
    'DELETE FROM storage_object_parts WHERE object_id = $1 RETURNING blob_key',
    [objectId],
  );
  return rows.map((r) => r.blob_key);
}

/** Drops a granted upload whose bytes never arrived (an aborted one); answers its parts' blobs. */
export async function dropPendingStorageObject(db: Queryable, objectId: string): Promise<string[]> {
  const parts = await dropStorageParts(db, objectId);
  await db.query('DELETE FROM storage_objects WHERE id = $1 AND uploaded_at IS NULL', [objectId]);
  return parts;
}

/**
 * Uploads of the project granted more than `olderThanSeconds` ago whose bytes never arrived: their
 * rows go, and the blobs of their parts are answered for deletion (no upload leaves parts behind).
 */
export async function dropStaleStorageUploads(
  db: Queryable,
  projectId: string,
  olderThanSeconds: number,
): Promise<string[]> {
  const { rows } = await db.query<{ blob_key: string | null }>(
    `WITH stale AS (
       DELETE FROM storage_objects WHERE project_id = $1 AND uploaded_at IS NULL
          AND created_at < now() - make_interval(secs => $2) RETURNING id)
     SELECT p.blob_key FROM storage_object_parts p WHERE p.object_id IN (SELECT id FROM stale)`,
    [projectId, olderThanSeconds],
  );
  return rows.map((r) => r.blob_key).filter((k): k is string => k !== null);
}

/**
 * After a volume is deleted: the project's storage objects in the directories its versions named
 * that no remaining version holds, nor an unfilled one could still take, go. Answers their blobs.
 */
export async function dropUnheldStorageObjects(
  db: Queryable,
  projectId: string,
  prefixes: string[],
): Promise<string[]> {
  const directories = prefixes.map((p) => `${p.replace(/\/+$/, '')}/`).filter((d) => d !== '/');
  if (!directories.length) return [];
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
  return rows.map((r) => r.blob_key).filter((k): k is string => k !== null);
}
