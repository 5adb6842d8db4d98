/** Read model of batches (`batch/<id>` projects it) and each line's recorded answer. */
import type { BatchStatus } from '../shared/batches';
import type { Queryable } from './pool';

export interface BatchRow {
  id: string;
  project_id: string;
  api_key_id: string;
  user_id: string | null;
  endpoint: string;
  input_file_id: string;
  output_file_id: string | null;
  error_file_id: string | null;
  model_id: string | null;
  completion_window: string;
  priority: number | null;
  status: BatchStatus;
  error: string | null;
  file_size_bytes: string | null;
  total_lines: number | null;
  done_lines: number;
  created_at: Date;
  job_deadline: Date;
  completed_at: Date | null;
}

export async function insertBatch(
  db: Queryable,
  b: {
    id: string;
    projectId: string;
    apiKeyId: string;
    userId: string | null;
    endpoint: string;
    inputFileId: string;
    modelId?: string;
    completionWindow: string;
    priority?: number;
    fileSizeBytes: number | null;
    deadline: Date;
  },
): Promise<BatchRow> {
  const { rows } = await db.query<BatchRow>(
    `INSERT INTO batches (id, project_id, api_key_id, user_id, endpoint, input_file_id, model_id, completion_window,
                          priority, status, file_size_bytes, job_deadline)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'VALIDATING', $10, $11) RETURNING *`,
    [
      b.id,
      b.projectId,
      b.apiKeyId,
      b.userId,
      b.endpoint,
      b.inputFileId,
      b.modelId ?? null,
      b.completionWindow,
      b.priority ?? null,
      b.fileSizeBytes,
      b.deadline,
    ],
  );
  return rows[0];
}

export async function deleteBatchRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM batches WHERE id = $1', [id]);
}

/** Scoped by project: another project's batch is not found. */
export async function getBatch(db: Queryable, projectId: string, id: string): Promise<BatchRow | null> {
  const { rows } = await db.query<BatchRow>('SELECT * FROM batches WHERE id = $1 AND project_id = $2', [id, projectId]);
  return rows[0] ?? null;
}

export async function getBatchById(db: Queryable, id: string): Promise<BatchRow | null> {
  const { rows } = await db.query<BatchRow>('SELECT * FROM batches WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** The project's batches, newest first (the SDKs type the list as a plain array). */
export async function listBatches(db: Queryable, projectId: string, limit: number): Promise<BatchRow[]> {
  const { rows } = await db.query<BatchRow>(
    'SELECT * FROM batches WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2',
    [projectId, limit],
  );
  return rows;
}

/** A status change as the workflow sees it; an ended batch does not change again. */
export async function projectBatch(
  db: Queryable,
  id: string,
  p: {
    status: BatchStatus;
    error?: string | null;
    totalLines?: number;
    outputFileId?: string | null;
    errorFileId?: string | null;
    ended?: boolean;
  },
): Promise<void> {
  await db.query(
    `UPDATE batches SET status = $2, error = coalesce($3, error), total_lines = coalesce($4, total_lines),
            output_file_id = coalesce($5, output_file_id), error_file_id = coalesce($6, error_file_id),
            completed_at = CASE WHEN $7 THEN coalesce(completed_at, now()) ELSE completed_at END,
            done_lines = (SELECT count(*) FROM batch_answers WHERE batch_id = $1)
      WHERE id = $1 AND completed_at IS NULL`,
    [id, p.status, p.error ?? null, p.totalLines ?? null, p.outputFileId ?? null, p.errorFileId ?? null, !!p.ended],
  );
}

/** The progress readers see: how many lines have their answer. */
export async function refreshBatchProgress(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE batches SET done_lines = (SELECT count(*) FROM batch_answers WHERE batch_id = $1)
      WHERE id = $1 AND completed_at IS NULL`,
    [id],
  );
}

export interface BatchAnswer {
  line: number;
  custom_id: string;
  status_code: number | null;
  body: unknown;
  error: string | null;
}

/** Records a line's answer; a line answered already keeps its first answer. Whether this one was new. */
export async function recordBatchAnswer(db: Queryable, batchId: string, a: BatchAnswer): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO batch_answers (batch_id, line, custom_id, status_code, body, error) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (batch_id, line) DO NOTHING`,
    [batchId, a.line, a.custom_id, a.status_code, a.body === undefined ? null : JSON.stringify(a.body), a.error],
  );
  return (rowCount ?? 0) > 0;
}

/** The lines in [from, to) that have their answer. */
export async function answeredLines(db: Queryable, batchId: string, from: number, to: number): Promise<Set<number>> {
  const { rows } = await db.query<{ line: number }>(
    'SELECT line FROM batch_answers WHERE batch_id = $1 AND line >= $2 AND line < $3',
    [batchId, from, to],
  );
  return new Set(rows.map((r) => r.line));
}

/** Up to `limit` answers after line `after`, in line order (the output is written in pages). */
export async function answersAfter(db: Queryable, batchId: string, after: number, limit: number) {
  const { rows } = await db.query<BatchAnswer>(
    `SELECT line, custom_id, status_code, body, error FROM batch_answers
      WHERE batch_id = $1 AND line > $2 ORDER BY line LIMIT $3`,
    [batchId, after, limit],
  );
  return rows;
}

export async function deleteBatchAnswers(db: Queryable, batchId: string): Promise<void> {
  await db.query('DELETE FROM batch_answers WHERE batch_id = $1', [batchId]);
}
