/** The gateway's kept answers of batch and evaluation calls (migration 040, shared/work-calls.ts). */
import type { WorkTag } from '../shared/work-tag';
import type { Queryable } from './pool';

export interface KeptAnswer {
  status: number;
  contentType: string | null;
  body: Buffer;
}

export async function findWorkCallAnswer(db: Queryable, work: WorkTag, key: string): Promise<KeptAnswer | null> {
  const { rows } = await db.query<{ status: number; content_type: string | null; body: Buffer }>(
    'SELECT status, content_type, body FROM work_call_answers WHERE work_kind = $1 AND work_id = $2 AND call_key = $3',
    [work.kind, work.id, key],
  );
  return rows[0] ? { status: rows[0].status, contentType: rows[0].content_type, body: rows[0].body } : null;
}

/** Keeps an answer; the first one kept for a key stays. */
export async function keepWorkCallAnswer(db: Queryable, work: WorkTag, key: string, a: KeptAnswer): Promise<void> {
  await db.query(
    `INSERT INTO work_call_answers (work_kind, work_id, call_key, status, content_type, body)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
    [work.kind, work.id, key, a.status, a.contentType, a.body],
  );
}

/** Removes a work's kept answers (its own tables hold them now). */
export async function forgetWorkCallAnswers(db: Queryable, work: WorkTag): Promise<void> {
  await db.query('DELETE FROM work_call_answers WHERE work_kind = $1 AND work_id = $2', [work.kind, work.id]);
}
