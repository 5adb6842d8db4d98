/** Storage objects (`/v1/storage/*`, the Python CLI's volume uploads): see migration 032. */
import type { Queryable } from './pool';

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
 * The bytes of the upload arrived: it becomes the path's object. Answers the blobs of the path's
 * earlier uploads that no volume version holds, now unreachable (their rows are gone); null when
 * the upload had already arrived (a second PUT to a single-use URL).
 */
export async function storageObjectUploaded(
  db: Queryable,
  id: string,
  stored: { bytes: number; blobKey: string },
): Promise<string[] | null> {
  const { rows } = await db.query<{ project_id: string; path: string }>(
    `UPDATE storage_objects SET bytes = $2, blob_key = $3, uploaded_at = clock_timestamp()
      WHERE id = $1 AND uploaded_at IS NULL RETURNING project_id, path`,
    [id, stored.bytes, stored.blobKey],
  );
  if (!rows[0]) return null;
  const { rows: gone } = await db.query<{ blob_key: string }>(
    `DELETE FROM storage_objects o
      WHERE o.project_id = $1 AND o.path = $2 AND o.id <> $3 AND o.uploaded_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM deployment_volume_versions v
                         WHERE v.files @> jsonb_build_array(jsonb_build_object('file_id', o.id)))
      RETURNING o.blob_key`,
    [rows[0].project_id, rows[0].path, id],
  );
  return gone.map((r) => r.blob_key);
}
