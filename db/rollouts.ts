/** Rollouts of endpoints (SDK beta.endpoints.rollouts); the workflow rollout/<id> writes their progress. */
import type { RolloutPlan, RolloutSnapshot, RolloutState } from '../shared/rollouts';
import { TERMINAL_ROLLOUT_STATES } from '../shared/rollouts';
import { newEtag } from './endpoints';
import type { Queryable } from './pool';

export interface RolloutRow {
  id: string;
  endpoint_id: string;
  project_id: string;
  source_deployment_id: string;
  target_deployment_id: string;
  strategy: RolloutPlan['strategy'];
  spec: RolloutPlan & { request: Record<string, unknown> };
  state: RolloutState;
  status: Pick<RolloutSnapshot, 'steps' | 'condition'> & { updatedAt?: string };
  current_step: number | null;
  current_traffic_percent: number | null;
  pause_info: RolloutSnapshot['pauseInfo'] | null;
  etag: string;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  created_us: string;
}

const SELECT = `SELECT r.*, (extract(epoch FROM r.created_at) * 1000000)::bigint AS created_us FROM endpoint_rollouts r`;

/** Inserts a pending rollout; false when the endpoint already has one that is not finished. */
export async function insertRollout(
  db: Queryable,
  r: {
    id: string;
    endpointId: string;
    projectId: string;
    sourceId: string;
    targetId: string;
    spec: RolloutRow['spec'];
  },
): Promise<boolean> {
  const status = {
    steps: r.spec.steps.map((s, i) => ({
      stepIndex: i,
      targetTrafficPercent: s.traffic,
      state: 'ROLLOUT_STEP_STATE_PENDING',
    })),
  };
  const { rowCount } = await db.query(
    `INSERT INTO endpoint_rollouts (id, endpoint_id, project_id, source_deployment_id, target_deployment_id, strategy,
                                    spec, status, etag)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (endpoint_id) WHERE state NOT IN ('ROLLOUT_STATE_COMPLETED', 'ROLLOUT_STATE_ABORTED', 'ROLLOUT_STATE_CANCELED')
     DO NOTHING`,
    [
      r.id,
      r.endpointId,
      r.projectId,
      r.sourceId,
      r.targetId,
      r.spec.strategy,
      JSON.stringify(r.spec),
      JSON.stringify(status),
      newEtag(),
    ],
  );
  return rowCount === 1;
}

export async function getRollout(db: Queryable, endpointId: string, id: string): Promise<RolloutRow | null> {
  const { rows } = await db.query<RolloutRow>(`${SELECT} WHERE r.endpoint_id = $1 AND r.id = $2`, [endpointId, id]);
  return rows[0] ?? null;
}

export async function listRollouts(
  db: Queryable,
  endpointId: string,
  q: {
    filter?: 'ROLLOUT_FILTER_ACTIVE' | 'ROLLOUT_FILTER_TERMINAL';
    after?: { createdUs: string; id: string };
    limit: number;
  },
): Promise<RolloutRow[]> {
  const terminal = q.filter === 'ROLLOUT_FILTER_TERMINAL' ? true : q.filter === 'ROLLOUT_FILTER_ACTIVE' ? false : null;
  const { rows } = await db.query<RolloutRow>(
    `${SELECT} WHERE r.endpoint_id = $1
        AND ($2::boolean IS NULL OR (r.state = ANY($3)) = $2)
        AND ($4::bigint IS NULL
             OR (r.created_at, r.id) < (timestamptz 'epoch' + $4::bigint * interval '1 microsecond', $5::text))
      ORDER BY r.created_at DESC, r.id DESC LIMIT $6`,
    [endpointId, terminal, TERMINAL_ROLLOUT_STATES, q.after?.createdUs ?? null, q.after?.id ?? null, q.limit],
  );
  return rows;
}

/** PENDING -> RUNNING when the API starts its workflow; false if it was not pending. */
export async function markRolloutStarting(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE endpoint_rollouts SET state = 'ROLLOUT_STATE_RUNNING', started_at = now(), etag = $2, updated_at = now()
      WHERE id = $1 AND state = 'ROLLOUT_STATE_PENDING'`,
    [id, newEtag()],
  );
  return rowCount === 1;
}

/** Back to PENDING when its workflow could not be started (the start can be tried again). */
export async function unmarkRolloutStarting(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE endpoint_rollouts SET state = 'ROLLOUT_STATE_PENDING', started_at = NULL WHERE id = $1 AND version = 0`,
    [id],
  );
}

/** The workflow's projection; a write older than the stored one is ignored. */
export async function recordRolloutSnapshot(
  db: Queryable,
  id: string,
  version: number,
  s: RolloutSnapshot,
): Promise<void> {
  await db.query(
    `UPDATE endpoint_rollouts
        SET state = $3, status = $4, current_step = $5, current_traffic_percent = $6, pause_info = $7,
            started_at = coalesce($8::timestamptz, started_at), completed_at = $9, version = $2, etag = $10,
            updated_at = now()
      WHERE id = $1 AND version < $2`,
    [
      id,
      version,
      s.state,
      JSON.stringify({ steps: s.steps, condition: s.condition, updatedAt: new Date().toISOString() }),
      s.currentStep ?? null,
      s.currentTrafficPercent ?? null,
      s.pauseInfo ? JSON.stringify(s.pauseInfo) : null,
      s.startedAt ?? null,
      s.completedAt ?? null,
      newEtag(),
    ],
  );
}

/** Deletes a finished or never-started rollout; false when it is running. */
export async function deleteRolloutRow(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `DELETE FROM endpoint_rollouts WHERE id = $1 AND (state = ANY($2) OR state = 'ROLLOUT_STATE_PENDING')`,
    [id, TERMINAL_ROLLOUT_STATES],
  );
  return rowCount === 1;
}

/** A deployment that a rollout not yet finished shifts traffic from or to (it cannot be deleted meanwhile). */
export async function activeRolloutOf(db: Queryable, deploymentId: string): Promise<string | null> {
  const { rows } = await db.query(
    `SELECT id FROM endpoint_rollouts WHERE (source_deployment_id = $1 OR target_deployment_id = $1)
        AND NOT (state = ANY($2)) LIMIT 1`,
    [deploymentId, TERMINAL_ROLLOUT_STATES],
  );
  return rows[0]?.id ?? null;
}
