/** Read model of evaluations (`evaluation/<id>` projects it) and each row's recorded outcome. */
import type { EvaluationStatus, EvaluationType } from '../shared/evaluations';
import type { Queryable } from './pool';

export interface StatusUpdate {
  status: EvaluationStatus;
  message: string;
  timestamp: string;
}

export interface EvaluationRow {
  id: string;
  project_id: string;
  api_key_id: string;
  user_id: string | null;
  type: EvaluationType;
  parameters: Record<string, unknown>;
  sealed_tokens: Record<string, string>;
  status: EvaluationStatus;
  status_updates: StatusUpdate[];
  results: Record<string, unknown> | null;
  total_rows: number | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertEvaluation(
  db: Queryable,
  e: Pick<EvaluationRow, 'id' | 'project_id' | 'api_key_id' | 'user_id' | 'type' | 'parameters' | 'sealed_tokens'>,
): Promise<void> {
  const update: StatusUpdate = { status: 'pending', message: 'Created.', timestamp: new Date().toISOString() };
  await db.query(
    `INSERT INTO evaluations (id, project_id, api_key_id, user_id, type, parameters, sealed_tokens, status, status_updates)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8)`,
    [
      e.id,
      e.project_id,
      e.api_key_id,
      e.user_id,
      e.type,
      JSON.stringify(e.parameters),
      JSON.stringify(e.sealed_tokens),
      JSON.stringify([update]),
    ],
  );
}

export async function deleteEvaluationRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM evaluations WHERE id = $1', [id]);
}

/** Scoped by project: another project's evaluation is not found. */
export async function getEvaluation(db: Queryable, projectId: string, id: string): Promise<EvaluationRow | null> {
  const { rows } = await db.query<EvaluationRow>('SELECT * FROM evaluations WHERE id = $1 AND project_id = $2', [
    id,
    projectId,
  ]);
  return rows[0] ?? null;
}

export async function getEvaluationById(db: Queryable, id: string): Promise<EvaluationRow | null> {
  const { rows } = await db.query<EvaluationRow>('SELECT * FROM evaluations WHERE id = $1', [id]);
  return rows[0] ?? null;
}

/** The project's evaluations, newest first, of one status when asked. */
export async function listEvaluations(
  db: Queryable,
  projectId: string,
  opts: { status?: string; limit: number },
): Promise<EvaluationRow[]> {
  const { rows } = await db.query<EvaluationRow>(
    `SELECT * FROM evaluations WHERE project_id = $1 AND ($2::text IS NULL OR status = $2)
      ORDER BY created_at DESC, id DESC LIMIT $3`,
    [projectId, opts.status ?? null, opts.limit],
  );
  return rows;
}

/**
 * A status change as the workflow sees it, told in status_updates; the same change twice (a
 * retried activity) is told once. An ended evaluation does not change again.
 */
export async function projectEvaluation(
  db: Queryable,
  id: string,
  p: { status: EvaluationStatus; message: string; totalRows?: number; results?: Record<string, unknown> },
): Promise<void> {
  const update: StatusUpdate = { status: p.status, message: p.message, timestamp: new Date().toISOString() };
  await db.query(
    `UPDATE evaluations
        SET status = $2, total_rows = coalesce($3, total_rows), results = coalesce($4, results), updated_at = now(),
            status_updates = CASE WHEN status_updates @> jsonb_build_array(jsonb_build_object('status', $2::text, 'message', $5::text))
                                  THEN status_updates ELSE status_updates || jsonb_build_array($6::jsonb) END
      WHERE id = $1 AND status NOT IN ('completed', 'error', 'user_error')`,
    [
      id,
      p.status,
      p.totalRows ?? null,
      p.results ? JSON.stringify(p.results) : null,
      p.message,
      JSON.stringify(update),
    ],
  );
}

/** Records a row's outcome; a row recorded already keeps its first. */
export async function recordEvaluationRow(db: Queryable, id: string, row: number, outcome: unknown): Promise<void> {
  await db.query(
    `INSERT INTO evaluation_rows (evaluation_id, row, outcome) VALUES ($1, $2, $3)
     ON CONFLICT (evaluation_id, row) DO NOTHING`,
    [id, row, JSON.stringify(outcome)],
  );
}

/** The rows in [from, to) that have their outcome. */
export async function recordedRows(db: Queryable, id: string, from: number, to: number): Promise<Set<number>> {
  const { rows } = await db.query<{ row: number }>(
    'SELECT row FROM evaluation_rows WHERE evaluation_id = $1 AND row >= $2 AND row < $3',
    [id, from, to],
  );
  return new Set(rows.map((r) => r.row));
}

/** Up to `limit` outcomes after row `after`, in row order. */
export async function outcomesAfter<T>(
  db: Queryable,
  id: string,
  after: number,
  limit: number,
): Promise<{ row: number; outcome: T }[]> {
  const { rows } = await db.query<{ row: number; outcome: T }>(
    'SELECT row, outcome FROM evaluation_rows WHERE evaluation_id = $1 AND row > $2 ORDER BY row LIMIT $3',
    [id, after, limit],
  );
  return rows;
}
