/** Read model of system self-checks (written by activities, read by the API). */
import type { Queryable } from './pool';
import type { HostReport, ProbeRecord, ProbeStatus, SelfCheckStatus } from '../shared/self-check';

export interface SelfCheckRow {
  id: string;
  project_id: string;
  workflow_id: string;
  status: SelfCheckStatus;
  created_at: Date;
  completed_at: Date | null;
  probes: Array<{
    task_queue: string;
    status: ProbeStatus;
    host: HostReport | null;
    detail: string | null;
    latency_ms: number | null;
    updated_at: Date;
  }>;
}

export async function insertSelfCheck(
  db: Queryable,
  c: { id: string; projectId: string; workflowId: string; taskQueues: string[] },
): Promise<void> {
  await db.query(
    `INSERT INTO system_self_checks (id, project_id, workflow_id, status) VALUES ($1, $2, $3, 'running')`,
    [c.id, c.projectId, c.workflowId],
  );
  await db.query(
    `INSERT INTO system_self_check_probes (check_id, task_queue, status)
     SELECT $1, q, 'pending' FROM unnest($2::text[]) AS q`,
    [c.id, c.taskQueues],
  );
}

export async function deleteSelfCheck(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM system_self_checks WHERE id = $1', [id]);
}

/** Idempotent: a retried activity writes the same row again. */
export async function upsertProbe(db: Queryable, p: ProbeRecord): Promise<void> {
  await db.query(
    `INSERT INTO system_self_check_probes (check_id, task_queue, status, host, detail, latency_ms, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, now())
     ON CONFLICT (check_id, task_queue) DO UPDATE
       SET status = EXCLUDED.status, host = EXCLUDED.host, detail = EXCLUDED.detail,
           latency_ms = EXCLUDED.latency_ms, updated_at = now()`,
    [p.checkId, p.taskQueue, p.status, p.host ?? null, p.detail ?? null, p.latencyMs ?? null],
  );
}

/** Passed when every probe is ok; idempotent. */
export async function completeSelfCheck(db: Queryable, checkId: string): Promise<SelfCheckRow> {
  await db.query(
    `UPDATE system_self_checks c
        SET status = CASE WHEN EXISTS (
              SELECT 1 FROM system_self_check_probes p WHERE p.check_id = c.id AND p.status <> 'ok')
            THEN 'failed' ELSE 'passed' END,
            completed_at = coalesce(completed_at, now())
      WHERE id = $1`,
    [checkId],
  );
  const row = await findSelfCheck(db, checkId);
  if (!row) throw new Error(`self-check ${checkId} has no row`);
  return row;
}

const SELECT_WITH_PROBES = `
  SELECT c.*, coalesce(json_agg(json_build_object(
           'task_queue', p.task_queue, 'status', p.status, 'host', p.host, 'detail', p.detail,
           'latency_ms', p.latency_ms, 'updated_at', p.updated_at) ORDER BY p.task_queue)
         FILTER (WHERE p.task_queue IS NOT NULL), '[]') AS probes
    FROM system_self_checks c
    LEFT JOIN system_self_check_probes p ON p.check_id = c.id`;

async function findSelfCheck(db: Queryable, id: string): Promise<SelfCheckRow | null> {
  const { rows } = await db.query<SelfCheckRow>(`${SELECT_WITH_PROBES} WHERE c.id = $1 GROUP BY c.id`, [id]);
  return rows[0] ?? null;
}

/** Scoped by project: another project's check is not found. */
export async function getSelfCheck(db: Queryable, projectId: string, id: string): Promise<SelfCheckRow | null> {
  const { rows } = await db.query<SelfCheckRow>(
    `${SELECT_WITH_PROBES} WHERE c.id = $1 AND c.project_id = $2 GROUP BY c.id`,
    [id, projectId],
  );
  return rows[0] ?? null;
}

export async function listSelfChecks(db: Queryable, projectId: string, limit: number): Promise<SelfCheckRow[]> {
  const { rows } = await db.query<SelfCheckRow>(
    `${SELECT_WITH_PROBES} WHERE c.project_id = $1 GROUP BY c.id ORDER BY c.created_at DESC, c.id LIMIT $2`,
    [projectId, limit],
  );
  return rows;
}
