/** Remote model uploads and their events (SDK beta.models.uploads). */
import type { Queryable } from './pool';

export type UploadStatus =
  | 'REMOTE_UPLOAD_STATUS_PENDING'
  | 'REMOTE_UPLOAD_STATUS_RUNNING'
  | 'REMOTE_UPLOAD_STATUS_ERROR'
  | 'REMOTE_UPLOAD_STATUS_SUCCEEDED'
  | 'REMOTE_UPLOAD_STATUS_FAILED';

export type EventLevel = 'LEVEL_DEBUG' | 'LEVEL_INFO' | 'LEVEL_WARN' | 'LEVEL_ERROR';

export interface UploadRow {
  id: string;
  project_id: string;
  model_id: string;
  remote_url: string;
  sealed_token: Buffer | null;
  status: UploadStatus;
  status_message: string | null;
  restart_count: number;
  max_restarts: number;
  revision_id: string | null;
  created_at: Date;
  updated_at: Date;
  created_us: string;
}

const SELECT = `SELECT *, (extract(epoch FROM created_at) * 1000000)::bigint AS created_us FROM registry_uploads`;

export async function insertUpload(
  db: Queryable,
  u: { id: string; projectId: string; modelId: string; remoteUrl: string; sealedToken?: Buffer; maxRestarts: number },
): Promise<void> {
  await db.query(
    `INSERT INTO registry_uploads (id, project_id, model_id, remote_url, sealed_token, max_restarts)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [u.id, u.projectId, u.modelId, u.remoteUrl, u.sealedToken ?? null, u.maxRestarts],
  );
}

export async function getUpload(db: Queryable, projectId: string, id: string): Promise<UploadRow | null> {
  const { rows } = await db.query<UploadRow>(`${SELECT} WHERE id = $1 AND project_id = $2`, [id, projectId]);
  return rows[0] ?? null;
}

export async function getUploadById(db: Queryable, id: string): Promise<UploadRow | null> {
  const { rows } = await db.query<UploadRow>(`${SELECT} WHERE id = $1`, [id]);
  return rows[0] ?? null;
}

export async function listUploads(
  db: Queryable,
  projectId: string,
  after: { createdUs: string; id: string } | undefined,
  limit: number,
): Promise<UploadRow[]> {
  const { rows } = await db.query<UploadRow>(
    `${SELECT} WHERE project_id = $1
       AND ($2::bigint IS NULL
            OR (created_at, id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3::text))
     ORDER BY created_at DESC, id DESC LIMIT $4`,
    [projectId, after?.createdUs ?? null, after?.id ?? null, limit],
  );
  return rows;
}

export async function setUploadStatus(
  db: Queryable,
  id: string,
  s: { status: UploadStatus; message?: string; restartCount?: number; revisionId?: string },
): Promise<void> {
  await db.query(
    `UPDATE registry_uploads
        SET status = $2, status_message = coalesce($3, status_message),
            restart_count = greatest(restart_count, coalesce($4, 0)), revision_id = coalesce($5, revision_id),
            updated_at = now()
      WHERE id = $1`,
    [id, s.status, s.message ?? null, s.restartCount ?? null, s.revisionId ?? null],
  );
}

export async function addUploadEvent(
  db: Queryable,
  uploadId: string,
  e: { level: EventLevel; type: string; message: string },
): Promise<void> {
  await db.query('INSERT INTO registry_upload_events (upload_id, level, type, message) VALUES ($1, $2, $3, $4)', [
    uploadId,
    e.level,
    e.type,
    e.message,
  ]);
}

export async function listUploadEvents(
  db: Queryable,
  uploadId: string,
  afterId: number,
  limit: number,
): Promise<Array<{ id: string; level: EventLevel; type: string; message: string; created_at: Date }>> {
  const { rows } = await db.query(
    // Ordered by the bigint column, not by the text it is returned as ('10' sorts before '9').
    `SELECT e.id::text AS id, e.level, e.type, e.message, e.created_at FROM registry_upload_events e
      WHERE e.upload_id = $1 AND e.id > $2 ORDER BY e.id LIMIT $3`,
    [uploadId, afterId, limit],
  );
  return rows;
}

export async function deleteUploadRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM registry_uploads WHERE id = $1', [id]);
}
