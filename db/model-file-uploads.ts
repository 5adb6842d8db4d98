/**
 * Local weight files uploaded into the model registry in parts (migration 030;
 * api/routes/model-file-transfers.ts). An upload moves open -> completing ->
 * completed | failed, or open -> expired when its workflow's timer runs out.
 */
import { revisionBlobPrefix } from '../shared/model-file-uploads';
import { scheduleBlobDeletions } from './blob-deletions';
import { withTransaction, type Db, type Queryable } from './pool';

export type ModelFileUploadState = 'open' | 'completing' | 'completed' | 'failed' | 'expired';

export interface ModelFileUploadRow {
  id: string;
  project_id: string;
  model_id: string;
  revision_id: string;
  state: ModelFileUploadState;
  expires_at: Date;
}

export interface UploadFileRow {
  path: string;
  etag: string;
  part_count: number;
}

export interface UploadPartRow {
  path: string;
  part_number: number;
  bytes: string;
  md5: string;
  blob_key: string;
}

export async function insertModelFileUpload(
  db: Queryable,
  u: {
    id: string;
    projectId: string;
    modelId: string;
    revisionId: string;
    expiresAt: Date;
    files: Array<{ path: string; etag: string; partCount: number }>;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO model_file_uploads (id, project_id, model_id, revision_id, expires_at) VALUES ($1, $2, $3, $4, $5)`,
    [u.id, u.projectId, u.modelId, u.revisionId, u.expiresAt],
  );
  await db.query(
    `INSERT INTO model_file_upload_files (upload_id, path, etag, part_count)
     SELECT $1, * FROM unnest($2::text[], $3::text[], $4::int[])`,
    [u.id, u.files.map((f) => f.path), u.files.map((f) => f.etag), u.files.map((f) => f.partCount)],
  );
}

export async function getModelFileUpload(
  db: Queryable,
  id: string,
  projectId?: string,
): Promise<ModelFileUploadRow | null> {
  const { rows } = await db.query<ModelFileUploadRow>(
    `SELECT id, project_id, model_id, revision_id, state, expires_at FROM model_file_uploads
      WHERE id = $1 AND ($2::text IS NULL OR project_id = $2)`,
    [id, projectId ?? null],
  );
  return rows[0] ?? null;
}

export async function listUploadFiles(db: Queryable, uploadId: string): Promise<UploadFileRow[]> {
  const { rows } = await db.query<UploadFileRow>(
    'SELECT path, etag, part_count FROM model_file_upload_files WHERE upload_id = $1 ORDER BY path COLLATE "C"',
    [uploadId],
  );
  return rows;
}

export async function listUploadParts(db: Queryable, uploadId: string): Promise<UploadPartRow[]> {
  const { rows } = await db.query<UploadPartRow>(
    `SELECT path, part_number, bytes, md5, blob_key FROM model_file_upload_parts
      WHERE upload_id = $1 ORDER BY path, part_number`,
    [uploadId],
  );
  return rows;
}

/**
 * Records a part (a retry replaces the earlier attempt) while the upload is open; answers the
 * blob key it replaced, recorded for deletion (db/blob-deletions.ts), or null. Null instead of an
 * answer: the upload takes no parts now (not open, or gone). In a transaction.
 */
export async function recordUploadPart(
  tx: Queryable,
  p: { uploadId: string; path: string; partNumber: number; bytes: number; md5: string; blobKey: string },
): Promise<{ replaced: string | null } | null> {
  // As files' recordPart (db/files.ts): the upload's row lock first, then each statement sees what
  // the part before it committed, so a part sent twice at once names the blob it replaced.
  const { rows } = await tx.query<{ state: string }>('SELECT state FROM model_file_uploads WHERE id = $1 FOR UPDATE', [
    p.uploadId,
  ]);
  if (rows[0]?.state !== 'open') return null;
  const previous = await tx.query<{ blob_key: string }>(
    'SELECT blob_key FROM model_file_upload_parts WHERE upload_id = $1 AND path = $2 AND part_number = $3',
    [p.uploadId, p.path, p.partNumber],
  );
  await tx.query(
    `INSERT INTO model_file_upload_parts (upload_id, path, part_number, bytes, md5, blob_key)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (upload_id, path, part_number) DO UPDATE SET bytes = EXCLUDED.bytes, md5 = EXCLUDED.md5, blob_key = EXCLUDED.blob_key`,
    [p.uploadId, p.path, p.partNumber, p.bytes, p.md5, p.blobKey],
  );
  const replaced = previous.rows[0]?.blob_key ?? null;
  if (replaced) await scheduleBlobDeletions(tx, [replaced]);
  return { replaced };
}

/** Moves the upload from one state to another; false when it was not in `from`. */
export async function moveModelFileUpload(
  db: Queryable,
  id: string,
  from: ModelFileUploadState,
  to: ModelFileUploadState,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE model_file_uploads SET state = $3, state_since = now() WHERE id = $1 AND state = $2`,
    [id, from, to],
  );
  return rowCount === 1;
}

/**
 * How long a `complete` holds an upload without renewing its hold (it renews every third of this):
 * past it, the API process that was completing it is taken for dead, and another `complete` may
 * take the upload over, or its expiry discard it.
 */
export const COMPLETING_LEASE_SECONDS = 60;
/** A completing upload whose hold lapsed: its API process died mid-way. */
const LAPSED = `(state = 'completing' AND state_since < now() - make_interval(secs => ${COMPLETING_LEASE_SECONDS}))`;

/** Starts completing an upload: an open one, or one whose earlier `complete` died. False when neither. */
export async function beginCompletingModelFileUpload(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE model_file_uploads SET state = 'completing', state_since = now()
      WHERE id = $1 AND (state = 'open' OR ${LAPSED})`,
    [id],
  );
  return rowCount === 1;
}

/** Renews a `complete`'s hold on an upload (see COMPLETING_LEASE_SECONDS). */
export async function renewCompletingModelFileUpload(db: Queryable, id: string): Promise<void> {
  await db.query(`UPDATE model_file_uploads SET state_since = now() WHERE id = $1 AND state = 'completing'`, [id]);
}

/**
 * Ends an upload whose time ran out: an open one, or one whose `complete` died mid-way (its hold
 * lapsed). Answers the state it is in afterwards.
 */
export async function expireModelFileUpload(db: Queryable, id: string): Promise<ModelFileUploadState | null> {
  await db.query(
    `UPDATE model_file_uploads SET state = 'expired', state_since = now()
      WHERE id = $1 AND (state = 'open' OR ${LAPSED})`,
    [id],
  );
  return (await getModelFileUpload(db, id))?.state ?? null;
}

/**
 * Drops what an upload leaves when it ends: its parts, and the files of its revision when no
 * revision row holds them (a `complete` that was refused, or died half-way through joining them).
 * Answers their blobs, recorded for deletion (db/blob-deletions.ts) with the parts' rows.
 */
export async function dropUploadLeftovers(db: Db, upload: ModelFileUploadRow): Promise<string[]> {
  return withTransaction(db, async (tx) => {
    // After a part being recorded (recordUploadPart holds the upload's row), so its blob is counted.
    await tx.query('SELECT id FROM model_file_uploads WHERE id = $1 FOR UPDATE', [upload.id]);
    const { rows } = await tx.query<{ key: string }>(
      `SELECT blob_key AS key FROM model_file_upload_parts WHERE upload_id = $1
       UNION ALL
       SELECT $2 || '/' || f.path FROM model_file_upload_files f
        WHERE f.upload_id = $1 AND NOT EXISTS (SELECT 1 FROM registry_model_revisions WHERE id = $3)`,
      [upload.id, revisionBlobPrefix(upload.model_id, upload.revision_id), upload.revision_id],
    );
    await tx.query('DELETE FROM model_file_upload_parts WHERE upload_id = $1', [upload.id]);
    const keys = rows.map((r) => r.key);
    await scheduleBlobDeletions(tx, keys);
    return keys;
  });
}
