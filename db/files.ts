/** Read model of files: rows, status history, leases and upload tokens. */
import type { FilePurpose, FileType, ProcessingStatus, ValidationReport } from '../shared/files';
import { scheduleBlobDeletions } from './blob-deletions';
import type { Queryable } from './pool';

export interface FileRow {
  id: string;
  project_id: string;
  filename: string;
  purpose: FilePurpose;
  file_type: FileType;
  blob_key: string;
  bytes: string | null; // bigint comes back as text
  sha256: string | null;
  uploaded_at: Date | null;
  processing_status: ProcessingStatus;
  processing_note: string | null;
  validation_report: ValidationReport | null;
  created_at: Date;
}

export async function insertFile(
  db: Queryable,
  f: {
    id: string;
    projectId: string;
    filename: string;
    purpose: FilePurpose;
    fileType: FileType;
    blobKey: string;
    stored?: { bytes: number; sha256: string };
  },
): Promise<FileRow> {
  const { rows } = await db.query<FileRow>(
    `INSERT INTO files (id, project_id, filename, purpose, file_type, blob_key, bytes, sha256, uploaded_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $7::bigint IS NULL THEN NULL ELSE now() END)
     RETURNING *`,
    [
      f.id,
      f.projectId,
      f.filename,
      f.purpose,
      f.fileType,
      f.blobKey,
      f.stored?.bytes ?? null,
      f.stored?.sha256 ?? null,
    ],
  );
  await db.query(`INSERT INTO file_status_events (file_id, status, message) VALUES ($1, 'PENDING', $2)`, [
    f.id,
    f.stored ? 'Uploaded.' : 'Waiting for the upload.',
  ]);
  return rows[0];
}

/** Marks the file's bytes as stored; null when the row is gone (the file was deleted or discarded meanwhile). */
export async function markUploaded(
  db: Queryable,
  id: string,
  stored: { bytes: number; sha256: string },
): Promise<FileRow | null> {
  const { rows } = await db.query<FileRow>(
    `UPDATE files SET bytes = $2, sha256 = $3, uploaded_at = now() WHERE id = $1 RETURNING *`,
    [id, stored.bytes, stored.sha256],
  );
  if (!rows[0]) return null;
  await db.query(`INSERT INTO file_status_events (file_id, status, message) VALUES ($1, 'PENDING', 'Uploaded.')`, [id]);
  return rows[0];
}

/** Scoped by project: another project's file is not found. */
export async function getFile(db: Queryable, projectId: string, id: string): Promise<FileRow | null> {
  const { rows } = await db.query<FileRow>('SELECT * FROM files WHERE id = $1 AND project_id = $2', [id, projectId]);
  return rows[0] ?? null;
}

/** For activities, which act on behalf of the workflow that already checked the project. */
export async function getFileById(db: Queryable, id: string): Promise<FileRow | null> {
  const { rows } = await db.query<FileRow>('SELECT * FROM files WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** A page of the project's files, newest first: up to `limit` after the cursor `after` (api/cursor-pages.ts). */
export async function listFiles(
  db: Queryable,
  projectId: string,
  after: { createdUs: string; id: string } | undefined,
  limit: number,
): Promise<Array<FileRow & { created_us: string }>> {
  const { rows } = await db.query<FileRow & { created_us: string }>(
    `SELECT *, (extract(epoch FROM created_at) * 1000000)::bigint AS created_us FROM files
      WHERE project_id = $1
        AND ($2::bigint IS NULL
             OR (created_at, id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3::text))
      ORDER BY created_at DESC, id DESC LIMIT $4`,
    [projectId, after?.createdUs ?? null, after?.id ?? null, limit],
  );
  return rows;
}

/**
 * The project's file with these bytes (by SHA-256, hex), oldest first; a file whose processing
 * FAILED (the platform could not finish, not the data) does not count, so its bytes can be sent again.
 */
export async function findFileByChecksum(db: Queryable, projectId: string, sha256: string): Promise<string | null> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM files
      WHERE project_id = $1 AND sha256 = $2 AND processing_status <> 'FAILED'
      ORDER BY created_at, id LIMIT 1`,
    [projectId, sha256.toLowerCase()],
  );
  return rows[0]?.id ?? null;
}

/**
 * Moves processing_status and records the move. Idempotent for retried
 * activities: repeating the same move records nothing new.
 */
export async function recordFileStatus(
  db: Queryable,
  p: {
    fileId: string;
    status: ProcessingStatus;
    message?: string;
    report?: ValidationReport | null;
    note?: string | null;
  },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE files
        SET processing_status = $2,
            validation_report = CASE WHEN $3::boolean THEN $4::jsonb ELSE validation_report END,
            processing_note = CASE WHEN $5::boolean THEN $6 ELSE processing_note END
      WHERE id = $1 AND processing_status IS DISTINCT FROM $2`,
    [p.fileId, p.status, p.report !== undefined, p.report ?? null, p.note !== undefined, p.note ?? null],
  );
  if (rowCount) {
    await db.query('INSERT INTO file_status_events (file_id, status, message) VALUES ($1, $2, $3)', [
      p.fileId,
      p.status,
      p.message ?? null,
    ]);
  }
  return Boolean(rowCount);
}

/** A note in the history without a status move (e.g. "resumed at line 81920"). */
export async function recordFileEvent(db: Queryable, fileId: string, status: ProcessingStatus, message: string) {
  await db.query('INSERT INTO file_status_events (file_id, status, message) VALUES ($1, $2, $3)', [
    fileId,
    status,
    message,
  ]);
}

export async function listFileEvents(
  db: Queryable,
  fileId: string,
): Promise<Array<{ status: ProcessingStatus; message: string | null; created_at: Date }>> {
  const { rows } = await db.query(
    'SELECT status, message, created_at FROM file_status_events WHERE file_id = $1 ORDER BY id',
    [fileId],
  );
  return rows;
}

export async function fileLeaseHolders(db: Queryable, fileId: string): Promise<string[]> {
  const { rows } = await db.query<{ holder: string }>(
    'SELECT holder FROM file_leases WHERE file_id = $1 ORDER BY holder',
    [fileId],
  );
  return rows.map((r) => r.holder);
}

export async function acquireFileLease(db: Queryable, fileId: string, holder: string): Promise<void> {
  await db.query('INSERT INTO file_leases (file_id, holder) VALUES ($1, $2) ON CONFLICT DO NOTHING', [fileId, holder]);
}

export async function releaseFileLease(db: Queryable, fileId: string, holder: string): Promise<void> {
  await db.query('DELETE FROM file_leases WHERE file_id = $1 AND holder = $2', [fileId, holder]);
}

export async function deleteFileRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM files WHERE id = $1', [id]);
}

/**
 * Locks a file for its removal: its multipart uploads first, then the file, the order every path
 * that changes both takes (a part's record and a complete lock the upload first), so no two of
 * them wait on each other. Once it returns, no part is being recorded. In a transaction; the
 * file's row, or null when it is gone.
 */
export async function lockFileForRemoval(
  tx: Queryable,
  fileId: string,
): Promise<{ blob_key: string; uploaded_at: Date | null } | null> {
  await tx.query('SELECT id FROM file_multipart_uploads WHERE file_id = $1 FOR UPDATE', [fileId]);
  const { rows } = await tx.query<{ blob_key: string; uploaded_at: Date | null }>(
    'SELECT blob_key, uploaded_at FROM files WHERE id = $1 FOR UPDATE',
    [fileId],
  );
  return rows[0] ?? null;
}

/**
 * Removes a locked file (lockFileForRemoval) with its multipart uploads and parts, and records
 * their blobs for deletion (db/blob-deletions.ts). Returns those keys. In the locking transaction.
 */
export async function removeLockedFile(tx: Queryable, file: { id: string; blob_key: string }): Promise<string[]> {
  const keys = [file.blob_key, ...(await partBlobKeysOfFile(tx, file.id))];
  await deleteFileRow(tx, file.id);
  await scheduleBlobDeletions(tx, keys);
  return keys;
}

/**
 * Deletes a file whose upload never completed, as removeLockedFile. Returns the keys of its blobs,
 * recorded for deletion: [] when the file is gone or was uploaded meanwhile. In a transaction.
 */
export async function deleteUnfinishedFile(tx: Queryable, fileId: string): Promise<string[]> {
  const file = await lockFileForRemoval(tx, fileId);
  if (!file || file.uploaded_at) return [];
  return removeLockedFile(tx, { id: fileId, blob_key: file.blob_key });
}

export async function insertUploadToken(
  db: Queryable,
  t: { id: string; fileId: string; maxBytes: number; exactBytes: number | null; expiresAt: Date },
): Promise<void> {
  await db.query(
    'INSERT INTO file_upload_tokens (id, file_id, max_bytes, exact_bytes, expires_at) VALUES ($1, $2, $3, $4, $5)',
    [t.id, t.fileId, t.maxBytes, t.exactBytes, t.expiresAt],
  );
}

/** Marks a token used, once: a second use (a replay) finds nothing. */
export async function consumeUploadToken(
  db: Queryable,
  id: string,
  fileId: string,
): Promise<{ max_bytes: string; exact_bytes: string | null } | null> {
  const { rows } = await db.query(
    `UPDATE file_upload_tokens SET used_at = now()
      WHERE id = $1 AND file_id = $2 AND used_at IS NULL AND expires_at > now()
      RETURNING max_bytes, exact_bytes`,
    [id, fileId],
  );
  return rows[0] ?? null;
}

export interface MultipartUploadRow {
  id: string;
  file_id: string;
  file_size: string;
  part_size: string;
  part_count: number;
  state: 'open' | 'completing' | 'completed' | 'aborted';
  expires_at: Date;
}

export interface MultipartPartRow {
  part_number: number;
  bytes: string;
  sha256: string;
  blob_key: string;
}

export async function insertMultipartUpload(
  db: Queryable,
  u: { id: string; fileId: string; fileSize: number; partSize: number; partCount: number; expiresAt: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO file_multipart_uploads (id, file_id, file_size, part_size, part_count, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [u.id, u.fileId, u.fileSize, u.partSize, u.partCount, u.expiresAt],
  );
}

/** Scoped by project through the file: another project's upload is not found. */
export async function getMultipartUpload(
  db: Queryable,
  projectId: string,
  id: string,
): Promise<MultipartUploadRow | null> {
  const { rows } = await db.query<MultipartUploadRow>(
    `SELECT u.* FROM file_multipart_uploads u JOIN files f ON f.id = u.file_id
      WHERE u.id = $1 AND f.project_id = $2`,
    [id, projectId],
  );
  return rows[0] ?? null;
}

/**
 * Bytes a project holds, what its storage quota counts: uploaded files by their size, and multipart
 * uploads still open by the size they declared (their parts are already on disk, or about to be);
 * storage objects (volume sources) and their parts; the files of its registry models' revisions
 * (uploaded, imported, or written by its fine-tunes), and the parts of model uploads not yet
 * completed.
 */
export async function projectStoredBytes(db: Queryable, projectId: string): Promise<number> {
  const { rows } = await db.query<{ total: string }>(
    `SELECT (SELECT COALESCE(SUM(COALESCE(f.bytes, u.file_size, 0)), 0)
               FROM files f LEFT JOIN file_multipart_uploads u ON u.file_id = f.id AND u.state IN ('open', 'completing')
              WHERE f.project_id = $1)
          + (SELECT COALESCE(SUM(bytes), 0) FROM storage_objects WHERE project_id = $1)
          + (SELECT COALESCE(SUM(p.bytes), 0) FROM storage_object_parts p
               JOIN storage_objects o ON o.id = p.object_id WHERE o.project_id = $1)
          + (SELECT COALESCE(SUM(f.size_bytes), 0) FROM registry_model_files f
               JOIN registry_model_revisions r ON r.id = f.revision_id
               JOIN registry_models m ON m.id = r.model_id WHERE m.project_id = $1)
          + (SELECT COALESCE(SUM(p.bytes), 0) FROM model_file_upload_parts p
               JOIN model_file_uploads u ON u.id = p.upload_id
              WHERE u.project_id = $1 AND u.state IN ('open', 'completing')) AS total`,
    [projectId],
  );
  return Number(rows[0].total);
}

/** The blobs of every part of the file's multipart upload, if it has one. */
export async function partBlobKeysOfFile(db: Queryable, fileId: string): Promise<string[]> {
  const { rows } = await db.query<{ blob_key: string }>(
    `SELECT p.blob_key FROM file_multipart_parts p JOIN file_multipart_uploads u ON u.id = p.upload_id
      WHERE u.file_id = $1`,
    [fileId],
  );
  return rows.map((r) => r.blob_key);
}

export async function getMultipartUploadForFile(
  db: Queryable,
  fileId: string,
  id: string,
): Promise<MultipartUploadRow | null> {
  const { rows } = await db.query<MultipartUploadRow>(
    'SELECT * FROM file_multipart_uploads WHERE id = $1 AND file_id = $2',
    [id, fileId],
  );
  return rows[0] ?? null;
}

/** Moves the upload from one state to another; false when it was not in `from` (a race or a replay). */
export async function moveMultipartState(
  db: Queryable,
  id: string,
  from: MultipartUploadRow['state'],
  to: MultipartUploadRow['state'],
): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE file_multipart_uploads SET state = $3 WHERE id = $1 AND state = $2', [
    id,
    from,
    to,
  ]);
  return Boolean(rowCount);
}

/**
 * Records a part, which may be sent again until the upload completes (the last one sent counts).
 * Under the upload's row lock, so parts of one upload and its moves between states take turns:
 * null when the upload is no longer open (nothing recorded), else the blob key of the part this
 * one replaced, if any, recorded for deletion (db/blob-deletions.ts). In a transaction: its
 * statements run one after another, each seeing what the part before it committed.
 */
export async function recordPart(
  tx: Queryable,
  p: { uploadId: string; partNumber: number; bytes: number; sha256: string; blobKey: string },
): Promise<{ replaced: string | null } | null> {
  const { rows } = await tx.query<{ state: string }>(
    'SELECT state FROM file_multipart_uploads WHERE id = $1 FOR UPDATE',
    [p.uploadId],
  );
  if (rows[0]?.state !== 'open') return null;
  const previous = await tx.query<{ blob_key: string }>(
    'SELECT blob_key FROM file_multipart_parts WHERE upload_id = $1 AND part_number = $2',
    [p.uploadId, p.partNumber],
  );
  await tx.query(
    `INSERT INTO file_multipart_parts (upload_id, part_number, bytes, sha256, blob_key) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (upload_id, part_number) DO UPDATE
       SET bytes = EXCLUDED.bytes, sha256 = EXCLUDED.sha256, blob_key = EXCLUDED.blob_key, uploaded_at = now()`,
    [p.uploadId, p.partNumber, p.bytes, p.sha256, p.blobKey],
  );
  const replaced = previous.rows[0]?.blob_key ?? null;
  if (replaced) await scheduleBlobDeletions(tx, [replaced]);
  return { replaced };
}

export async function listParts(db: Queryable, uploadId: string): Promise<MultipartPartRow[]> {
  const { rows } = await db.query<MultipartPartRow>(
    'SELECT part_number, bytes, sha256, blob_key FROM file_multipart_parts WHERE upload_id = $1 ORDER BY part_number',
    [uploadId],
  );
  return rows;
}
