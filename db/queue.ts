/**
 * The job queue's store. PostgreSQL gives what Temporal's task-queue priority
 * cannot: strict order. Claims of one deployment's queue are serialized by an
 * advisory lock (migration 026) and take the highest priority, then the
 * earliest submission, so the claim order is exactly the priority order.
 */
import { randomBytes } from 'node:crypto';
import { preparedStatement, withTransaction, type Db, type Queryable } from './pool';

export type JobStatus = 'pending' | 'running' | 'done' | 'failed' | 'canceled';
export const MAX_RETRIES = 3;

export interface JobRow {
  id: string;
  project_id: string;
  deployment_id: string;
  model: string;
  status: JobStatus;
  priority: string; // bigint
  payload: Record<string, unknown>;
  info: Record<string, unknown>;
  outputs: Record<string, unknown> | null;
  error: string | null;
  retries: number;
  warnings: string[];
  claim_token: string | null;
  claim_timeout_ms: number | null;
  claim_expires_at: Date | null;
  history: Array<{ status: JobStatus; at: string; note?: string }>;
  created_at: Date;
  claimed_at: Date | null;
  done_at: Date | null;
}

/** The columns of a JobRow, named (the hot statements are prepared: see preparedStatement). */
const JOB_COLUMNS = [
  'id',
  'project_id',
  'deployment_id',
  'model',
  'status',
  'priority',
  'payload',
  'info',
  'outputs',
  'error',
  'retries',
  'warnings',
  'claim_token',
  'claim_timeout_ms',
  'claim_expires_at',
  'history',
  'created_at',
  'claimed_at',
  'done_at',
] as const satisfies ReadonlyArray<keyof JobRow>;
const JOB = JOB_COLUMNS.join(', ');

/**
 * What a claim reads of the job it took: what the worker is answered (api/use-cases/queue.ts) and
 * its status. Not the whole row: a claim is made for every drained job, and the other twelve
 * columns (three timestamps, the history, the warnings) cost the API their parsing and PostgreSQL
 * their sending on each, for an answer that never shows them.
 */
const CLAIMED_COLUMNS = [
  'id',
  'model',
  'status',
  'priority',
  'payload',
  'info',
  'retries',
] as const satisfies ReadonlyArray<keyof JobRow>;
export type ClaimedJob = Pick<JobRow, (typeof CLAIMED_COLUMNS)[number]>;

const historyEntry = (status: string, note: string | null = null) =>
  `jsonb_build_array(jsonb_strip_nulls(jsonb_build_object('status', '${status}', 'at', clock_timestamp(), 'note', ${note ?? 'null'}::text)))`;

/**
 * Submits a job to the named deployment's queue in one statement. Returns the deployment's id
 * (whose waiting claims the caller wakes: queue-wakeups.ts), or null when the project has no such
 * deployment.
 */
export async function submitJob(
  db: Queryable,
  j: { id: string; projectId: string; model: string; priority: number; payload: object; info: object },
): Promise<string | null> {
  const { rows } = await db.query<{ deployment_id: string }>(
    SUBMIT([j.id, j.projectId, j.model, j.priority, j.payload, j.info]),
  );
  return rows[0]?.deployment_id ?? null;
}
const SUBMIT = preparedStatement(
  'queue_submit',
  `INSERT INTO queue_jobs (id, project_id, deployment_id, model, status, priority, payload, info, history)
   SELECT $1, $2, d.id, $3, 'pending', $4, $5, $6, ${historyEntry('pending')}
     FROM deployments d WHERE d.project_id = $2 AND d.name = $3
   RETURNING deployment_id`,
);

export async function getJob(db: Queryable, projectId: string, model: string, id: string): Promise<JobRow | null> {
  const { rows } = await db.query<JobRow>(GET_JOB([id, projectId, model]));
  return rows[0] ?? null;
}
const GET_JOB = preparedStatement(
  'queue_get_job',
  `SELECT ${JOB} FROM queue_jobs WHERE id = $1 AND project_id = $2 AND model = $3`,
);

/** Cancels a pending job; returns the status after the attempt (unchanged unless it was pending). */
export async function cancelJob(db: Queryable, id: string): Promise<JobStatus> {
  const { rows } = await db.query<{ status: JobStatus }>(
    `UPDATE queue_jobs SET status = 'canceled', done_at = clock_timestamp(), history = history || ${historyEntry('canceled')}
      WHERE id = $1 AND status = 'pending' RETURNING status`,
    [id],
  );
  if (rows[0]) return rows[0].status;
  const now = await db.query<{ status: JobStatus }>('SELECT status FROM queue_jobs WHERE id = $1', [id]);
  return now.rows[0].status;
}

/** Cancels every pending job of a deployment's queue; running jobs are untouched. */
export async function clearJobs(db: Queryable, deploymentId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE queue_jobs SET status = 'canceled', done_at = clock_timestamp(), history = history || ${historyEntry('canceled', "'cleared'")}
      WHERE deployment_id = $1 AND status = 'pending' RETURNING id`,
    [deploymentId],
  );
  return rows.map((r) => r.id);
}

export async function queueMetrics(db: Queryable, deploymentId: string): Promise<{ pending: number; running: number }> {
  const { rows } = await db.query<{ status: JobStatus; n: string }>(
    `SELECT status, count(*) AS n FROM queue_jobs
      WHERE deployment_id = $1 AND status IN ('pending', 'running') GROUP BY status`,
    [deploymentId],
  );
  const n = (s: JobStatus) => Number(rows.find((r) => r.status === s)?.n ?? 0);
  return { pending: n('pending'), running: n('running') };
}

export interface Claim {
  job: ClaimedJob;
  token: string;
}

export interface ClaimAttempt {
  /** The deployment whose queue was looked at; null when the project has no deployment of that name. */
  deploymentId: string | null;
  /** The job taken, with its claim token; null when the queue had no pending job. */
  claim: Claim | null;
  /**
   * The queue's dispatcher must be woken to watch this claim (it is not running, would look too
   * late, or is overdue). The caller wakes it, or gives the job back with `releaseClaim`.
   */
  wakeDispatcher: boolean;
}

/** Who claims a job of which queue, for how long. */
export interface ClaimRequest {
  projectId: string;
  /** The queue: a deployment's name. */
  model: string;
  worker: string;
  timeoutMs: number;
}

/**
 * Takes the next job of a project's queue in strict order (priority desc, then submission), in one
 * statement (migration 028, queue_claim): the deployment's lookup, the claim and the dispatcher's
 * wake time commit together.
 */
export async function claimJob(db: Queryable, c: ClaimRequest): Promise<ClaimAttempt> {
  const token = randomBytes(16).toString('hex');
  const { rows } = await db.query<ClaimedJob & { claim_deployment: string; wake_dispatcher: boolean }>(
    CLAIM([c.projectId, c.model, token, c.worker, c.timeoutMs]),
  );
  const row = rows[0];
  if (!row) return { deploymentId: null, claim: null, wakeDispatcher: false };
  const { claim_deployment: deploymentId, wake_dispatcher: wakeDispatcher, ...job } = row;
  return { deploymentId, claim: job.id ? { job, token } : null, wakeDispatcher };
}

/**
 * A dispatcher that has not looked at its queue this long after it was due is taken for gone (an
 * operator terminated it, say): the next claim starts a new one. Waking one that was only late
 * costs an early look, nothing more.
 */
const DISPATCHER_OVERDUE = "interval '10 seconds'";
const CLAIM = preparedStatement(
  'queue_claim',
  `SELECT c.claim_deployment, c.wake_dispatcher, ${CLAIMED_COLUMNS.map((col) => `(c.claim_job).${col}`).join(', ')}
     FROM queue_claim($1, $2, $3, $4, $5, ${DISPATCHER_OVERDUE}) c`,
);

/**
 * Gives a claim back before its worker has seen it, when the queue's dispatcher could not be woken
 * to watch it: the job is pending again with no retry counted, and the dispatcher's wake time is
 * cleared, so the next claim wakes (or starts) it. No claim stays that no timer watches.
 */
export async function releaseClaim(db: Queryable, deploymentId: string, claim: Claim): Promise<void> {
  await db.query(
    `WITH released AS (
       UPDATE queue_jobs SET status = 'pending', claim_token = NULL, claim_worker = NULL, claim_expires_at = NULL,
              history = history || ${historyEntry('pending', "'claim given back: the queue dispatcher could not be reached'")}
        WHERE id = $1 AND claim_token = $2 AND status = 'running' RETURNING id)
     UPDATE queue_dispatchers SET wake_at = NULL WHERE deployment_id = $3`,
    [claim.job.id, claim.token, deploymentId],
  );
}

/** Which claim a worker reports on: the job (by the project and model it was submitted to) and its claim token. */
export interface ClaimRef {
  projectId: string;
  model: string;
  id: string;
  token: string;
}

/**
 * A worker's update: merges info, extends the claim. Null when the claim is no longer the worker's
 * (or the project has no such job: the caller tells those apart only then, off the common path).
 */
export async function touchJob(db: Queryable, c: ClaimRef, info: object): Promise<JobRow | null> {
  const { rows } = await db.query<JobRow>(TOUCH([c.id, c.token, info, c.projectId, c.model]));
  return rows[0] ?? null;
}
const TOUCH = preparedStatement(
  'queue_touch',
  `UPDATE queue_jobs
      SET info = info || $3::jsonb,
          claim_expires_at = clock_timestamp() + make_interval(secs => claim_timeout_ms / 1000.0)
    WHERE id = $1 AND claim_token = $2 AND status = 'running' AND project_id = $4 AND model = $5
   RETURNING ${JOB}`,
);

/** A worker's outcome for its claim: done with outputs, or failed with an error; info is merged either way. */
export interface Outcome {
  status: 'done' | 'failed';
  outputs?: object;
  error?: string;
  info?: object;
}

/** A worker's outcome for its claim, in one statement; null as for touchJob. */
export async function finishJob(db: Queryable, c: ClaimRef, f: Outcome): Promise<JobRow | null> {
  const { rows } = await db.query<JobRow>(
    FINISH([c.id, c.token, f.status, f.outputs ?? null, f.error ?? null, f.info ?? {}, c.projectId, c.model]),
  );
  if (rows[0]) return rows[0];
  // The same claim reporting the same outcome again (its first answer was lost on the way): the job as it is.
  const again = await db.query<JobRow>(
    `SELECT ${JOB} FROM queue_jobs WHERE id = $1 AND claim_token = $2 AND status = $3 AND project_id = $4 AND model = $5`,
    [c.id, c.token, f.status, c.projectId, c.model],
  );
  return again.rows[0] ?? null;
}
/** The outcome's UPDATE, $1–$8 as FINISH's values; FINISH_AND_CLAIM makes it too. */
const FINISH_UPDATE = `UPDATE queue_jobs
      SET status = $3, outputs = $4, error = $5, info = info || $6::jsonb, done_at = clock_timestamp(),
          history = history || jsonb_build_array(jsonb_build_object('status', $3::text, 'at', clock_timestamp()))
    WHERE id = $1 AND claim_token = $2 AND status = 'running' AND project_id = $7 AND model = $8
   RETURNING ${JOB}`;
const FINISH = preparedStatement('queue_finish', FINISH_UPDATE);

/**
 * A worker's outcome for its claim and its next claim, in one statement (one round trip and one
 * commit per drained job instead of two): the finish of finishJob, then, only when it matched, the
 * claim of claimJob on the same queue. Null when the finish matched nothing (the claim is lost, or
 * the same outcome is being reported again): nothing was claimed, and the caller takes the
 * separate path. The two commit together: a worker whose answer is lost finds its outcome unmade
 * and its next job unclaimed, and reports again.
 */
export async function finishJobAndClaimNext(
  db: Queryable,
  c: ClaimRef,
  f: Outcome,
  next: Pick<ClaimRequest, 'worker' | 'timeoutMs'>,
): Promise<{ job: JobRow; next: ClaimAttempt } | null> {
  const token = randomBytes(16).toString('hex');
  const { rows } = await db.query<JobRow & Record<string, unknown>>(
    FINISH_AND_CLAIM([
      c.id,
      c.token,
      f.status,
      f.outputs ?? null,
      f.error ?? null,
      f.info ?? {},
      c.projectId,
      c.model,
      token,
      next.worker,
      next.timeoutMs,
    ]),
  );
  const row = rows[0];
  if (!row) return null;
  const job = {} as Record<string, unknown>;
  const claimed = {} as Record<string, unknown>;
  for (const col of JOB_COLUMNS) job[col] = row[col];
  for (const col of CLAIMED_COLUMNS) claimed[col] = row[`next_${col}`];
  const deploymentId = (row.claim_deployment as string | null) ?? null;
  return {
    job: job as unknown as JobRow,
    next: {
      deploymentId,
      claim: claimed.id ? { job: claimed as unknown as ClaimedJob, token } : null,
      wakeDispatcher: row.wake_dispatcher === true,
    },
  };
}
/**
 * The claim is lateral to the finished row (it takes the row's project and model), so it is made
 * only when the finish matched. Lock order: the finished job, then the claim's (the next job, the
 * dispatcher's row); sweepQueue skips a lapsed job that is locked, so it never waits on a finish
 * while holding the dispatcher's row.
 */
const FINISH_AND_CLAIM = preparedStatement(
  'queue_finish_and_claim',
  `WITH finished AS (${FINISH_UPDATE})
   SELECT ${JOB_COLUMNS.map((col) => `f.${col}`).join(', ')}, c.claim_deployment, c.wake_dispatcher,
          ${CLAIMED_COLUMNS.map((col) => `(c.claim_job).${col} AS next_${col}`).join(', ')}
     FROM finished f
     LEFT JOIN LATERAL queue_claim(f.project_id, f.model, $9, $10, $11, ${DISPATCHER_OVERDUE}) c ON true`,
);

export type ClaimCheck =
  | { state: 'alive'; remainingMs: number }
  | { state: 'requeued' | 'failed' }
  | { state: 'finished' }
  | { state: 'superseded' };

/**
 * A claim whose worker stopped sending updates (the row is locked by the caller): the job goes
 * back to the queue (retries + 1), or fails for good after MAX_RETRIES. `info` is kept either
 * way: it accumulates across attempts.
 */
async function lapseClaim(tx: Queryable, job: Pick<JobRow, 'id' | 'retries'>): Promise<'requeued' | 'failed'> {
  if (job.retries >= MAX_RETRIES) {
    await tx.query(
      `UPDATE queue_jobs SET status = 'failed', done_at = clock_timestamp(),
              error = $2, history = history || ${historyEntry('failed', "'claim timed out'")}
        WHERE id = $1`,
      [job.id, `The worker stopped sending updates within the claim timeout ${MAX_RETRIES + 1} times; the job failed.`],
    );
    return 'failed';
  }
  await tx.query(
    `UPDATE queue_jobs SET status = 'pending', retries = retries + 1, claim_token = NULL, claim_worker = NULL,
            claim_expires_at = NULL, history = history || ${historyEntry('pending', "'claim timed out; retried'")}
      WHERE id = $1`,
    [job.id],
  );
  return 'requeued';
}

/**
 * The timer of a claim made before queue dispatchers (a queueJob run still open) fired: if the
 * worker kept updating, how long is left; if not, the claim lapses.
 */
export async function checkClaim(db: Db, id: string, token: string): Promise<ClaimCheck> {
  return withTransaction(db, async (tx) => {
    const { rows } = await tx.query<JobRow & { remaining_ms: number }>(
      `SELECT ${JOB}, extract(epoch FROM (claim_expires_at - clock_timestamp())) * 1000 AS remaining_ms
         FROM queue_jobs WHERE id = $1 FOR UPDATE`,
      [id],
    );
    const job = rows[0];
    if (!job || job.claim_token !== token) return { state: 'superseded' };
    if (job.status !== 'running') return { state: 'finished' };
    if (job.remaining_ms > 0) return { state: 'alive', remainingMs: Math.ceil(job.remaining_ms) };
    return { state: await lapseClaim(tx, job) };
  });
}

/**
 * Inside a cancel's transaction: makes sure the queue's dispatcher looks at the queue by `by` (a
 * claim does the same inside its statement, migration 028). True when it must be woken (it is not
 * running, would look later, or is overdue); its wake time is then set to `by`, and the caller
 * signals it before committing. Locks the dispatcher's row, so a sweep deciding when to look next
 * sees this transaction's work.
 */
export async function ensureDispatcherBy(tx: Queryable, deploymentId: string, by: Date): Promise<boolean> {
  // One round trip: the upsert locks the row whether or not its WHERE lets it change wake_at
  // (PostgreSQL locks the conflicting row before it tests the WHERE), and returns a row only
  // when it inserted or moved wake_at, that is when the dispatcher must be woken.
  const { rows } = await tx.query(
    `INSERT INTO queue_dispatchers AS d (deployment_id, wake_at) VALUES ($1, $2)
     ON CONFLICT (deployment_id) DO UPDATE SET wake_at = EXCLUDED.wake_at
      WHERE d.wake_at IS NULL OR d.wake_at > EXCLUDED.wake_at OR d.wake_at < clock_timestamp() - ${DISPATCHER_OVERDUE}
     RETURNING 1`,
    [deploymentId, by],
  );
  return rows.length > 0;
}

export interface Sweep {
  requeued: number;
  failed: number;
  deleted: number;
  /** Claims still held. */
  running: number;
  /** Milliseconds until the next claim deadline or retention end; null when there is none. */
  nextInMs: number | null;
}

/**
 * The dispatcher's look at a queue: lapses the claims past their deadline, deletes finished jobs
 * past the retention period, and records when it must look next (the earliest claim deadline or
 * retention end), all in one transaction under the dispatcher's row lock.
 */
export async function sweepQueue(db: Db, deploymentId: string, retentionSeconds: number): Promise<Sweep> {
  return withTransaction(db, async (tx) => {
    await tx.query(
      'INSERT INTO queue_dispatchers (deployment_id) SELECT id FROM deployments WHERE id = $1 ON CONFLICT DO NOTHING',
      [deploymentId],
    );
    await tx.query('SELECT 1 FROM queue_dispatchers WHERE deployment_id = $1 FOR UPDATE', [deploymentId]);
    const lapsed = await tx.query<Pick<JobRow, 'id' | 'retries'>>(
      `SELECT id, retries FROM queue_jobs
        WHERE deployment_id = $1 AND status = 'running' AND claim_expires_at <= clock_timestamp()
        FOR UPDATE SKIP LOCKED`, // a job its worker is reporting on right now wins (see FINISH_AND_CLAIM)
      [deploymentId],
    );
    let requeued = 0;
    let failed = 0;
    for (const job of lapsed.rows) {
      if ((await lapseClaim(tx, job)) === 'requeued') requeued++;
      else failed++;
    }
    const deleted = await tx.query(
      `DELETE FROM queue_jobs
        WHERE deployment_id = $1 AND status IN ('done', 'failed', 'canceled')
          AND done_at <= clock_timestamp() - make_interval(secs => $2)`,
      [deploymentId, retentionSeconds],
    );
    const { rows } = await tx.query<{ running: string; next_ms: number | null }>(
      `SELECT (SELECT count(*) FROM queue_jobs WHERE deployment_id = $1 AND status = 'running') AS running,
              extract(epoch FROM (least(
                (SELECT min(claim_expires_at) FROM queue_jobs WHERE deployment_id = $1 AND status = 'running'),
                (SELECT min(done_at) + make_interval(secs => $2) FROM queue_jobs
                  WHERE deployment_id = $1 AND status IN ('done', 'failed', 'canceled'))
              ) - clock_timestamp())) * 1000 AS next_ms`,
      [deploymentId, retentionSeconds],
    );
    const nextInMs = rows[0].next_ms === null ? null : Math.max(0, Math.ceil(Number(rows[0].next_ms)));
    await tx.query(
      `UPDATE queue_dispatchers SET wake_at = clock_timestamp() + make_interval(secs => $2 / 1000.0)
        WHERE deployment_id = $1`,
      [deploymentId, nextInMs],
    );
    return { requeued, failed, deleted: deleted.rowCount ?? 0, running: Number(rows[0].running), nextInMs };
  });
}

export async function deleteJob(db: Queryable, id: string): Promise<void> {
  await db.query(`DELETE FROM queue_jobs WHERE id = $1 AND status IN ('done', 'failed', 'canceled')`, [id]);
}
