import type { TokenizedCounts } from '../fine-tunes/estimate';
/** Read model of fine-tuning jobs: rows, events, metrics, checkpoints. */
import {
  FINISHED_FINE_TUNE_STATUSES,
  fineTuneWorkflowId,
  type FineTuneEventType,
  type FineTuneStatus,
  type TrainingPlan,
} from '../shared/fine-tunes';
import { scheduleBlobDeletions } from './blob-deletions';
import { withTransaction, type Db, type Queryable } from './pool';
import { qualifiedModelName } from './models';

export interface FineTuneRow {
  id: string;
  /** USD charged so far, net of refunds (decimal text); read by getFineTune and listFineTunes only. */
  charged?: string;
  project_id: string;
  created_by: string;
  status: FineTuneStatus;
  plan: TrainingPlan;
  model_output_name: string;
  token_count: string | null;
  trainingfile_numlines: number | null;
  param_count: string | null;
  total_steps: number | null;
  epochs_completed: number;
  early_stopped: boolean;
  early_stopping_best_step: number | null;
  early_stopping_best_metric: number | null;
  output_prefix: string | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  model_object_id: string | null;
  model_object_revision_id: string | null;
  adapter_object_id: string | null;
  adapter_object_revision_id: string | null;
  adapter_output_name: string | null;
  /** One pass over each file, as the job's tokenization counted it (absent before tokenization). */
  tokenized_counts: { train: TokenizedCounts; eval: TokenizedCounts | null } | null;
}

export interface FineTuneEventRow {
  type: FineTuneEventType;
  level: 'info' | 'warning' | 'error';
  message: string;
  step: number | null;
  created_at: Date;
}

export async function insertFineTune(
  db: Queryable,
  j: { id: string; projectId: string; createdBy: string; plan: TrainingPlan; modelOutputName: string },
): Promise<FineTuneRow> {
  const { rows } = await db.query<FineTuneRow>(
    `INSERT INTO fine_tunes (id, project_id, created_by, status, plan, model_output_name)
     VALUES ($1, $2, $3, 'pending', $4, $5) RETURNING *`,
    [j.id, j.projectId, j.createdBy, j.plan, j.modelOutputName],
  );
  return rows[0];
}

/**
 * Removes a job's row with the file leases its workflow holds (`fine-tune/<id>`, which no foreign
 * key ties to the row), in one transaction that locks the row first: an activity still finishing
 * cannot re-create a lease or an event for a job that is gone (it needs the row). `blobKeys` lists
 * the job's blobs under that lock; they are recorded for deletion (db/blob-deletions.ts) in the
 * same transaction and answered.
 */
export async function deleteFineTuneRow(
  db: Db,
  id: string,
  blobKeys: (tx: Queryable) => Promise<string[]> = async () => [],
): Promise<string[]> {
  return withTransaction(db, async (tx) => {
    await tx.query('SELECT id FROM fine_tunes WHERE id = $1 FOR UPDATE', [id]);
    // Listed under the lock: a checkpoint an activity records meanwhile waits, then finds no job.
    const keys = await blobKeys(tx);
    await tx.query('DELETE FROM file_leases WHERE holder = $1', [fineTuneWorkflowId(id)]);
    await tx.query('DELETE FROM fine_tunes WHERE id = $1', [id]);
    await scheduleBlobDeletions(tx, keys);
    return keys;
  });
}

/** A job with what it has been charged so far, net of refunds (USD; usage_records by resource). */
const SELECT_WITH_CHARGE = `
  SELECT f.*, (SELECT coalesce(sum(u.amount), 0) FROM usage_records u WHERE u.resource_id = f.id)::text AS charged
    FROM fine_tunes f`;

export async function getFineTune(db: Queryable, projectId: string, id: string): Promise<FineTuneRow | null> {
  const { rows } = await db.query<FineTuneRow>(`${SELECT_WITH_CHARGE} WHERE f.id = $1 AND f.project_id = $2`, [
    id,
    projectId,
  ]);
  return rows[0] ?? null;
}

/** Records what the job's tokenization counted; the charge is computed from it. */
export async function setTokenizedCounts(
  db: Queryable,
  id: string,
  counts: { train: TokenizedCounts; eval: TokenizedCounts | null },
): Promise<void> {
  await db.query('UPDATE fine_tunes SET tokenized_counts = $2 WHERE id = $1', [id, JSON.stringify(counts)]);
}

export async function getFineTuneById(db: Queryable, id: string): Promise<FineTuneRow | null> {
  const { rows } = await db.query<FineTuneRow>('SELECT * FROM fine_tunes WHERE id = $1', [id]);
  return rows[0] ?? null;
}

export async function listFineTunes(db: Queryable, projectId: string): Promise<FineTuneRow[]> {
  const { rows } = await db.query<FineTuneRow>(
    `${SELECT_WITH_CHARGE} WHERE f.project_id = $1 ORDER BY f.created_at DESC, f.id DESC`,
    [projectId],
  );
  return rows;
}

/** Fields a workflow step may set on the job; only those given change. */
export interface FineTuneUpdate {
  status?: FineTuneStatus;
  token_count?: number;
  trainingfile_numlines?: number;
  param_count?: number;
  total_steps?: number;
  epochs_completed?: number;
  early_stopped?: boolean;
  early_stopping_best_step?: number | null;
  early_stopping_best_metric?: number | null;
  output_prefix?: string;
  error?: string;
  started?: boolean;
}

const UPDATABLE = [
  'status',
  'token_count',
  'trainingfile_numlines',
  'param_count',
  'total_steps',
  'epochs_completed',
  'early_stopped',
  'early_stopping_best_step',
  'early_stopping_best_metric',
  'output_prefix',
  'error',
] as const;

/** Statuses a job never leaves, as an SQL list. */
const FINISHED = `(${FINISHED_FINE_TUNE_STATUSES.map((s) => `'${s}'`).join(', ')})`;

export async function updateFineTune(db: Queryable, id: string, u: FineTuneUpdate): Promise<void> {
  const sets: string[] = ['updated_at = now()'];
  const values: unknown[] = [id];
  for (const column of UPDATABLE) {
    if (u[column] !== undefined) {
      values.push(u[column]);
      const value = `$${values.length}`;
      // The workflow and the cancel route both write the status: a finished job stays finished, and
      // a requested cancellation is replaced only by how the job ended, whatever order they land in.
      sets.push(
        column === 'status'
          ? `status = CASE WHEN status IN ${FINISHED} THEN status
                           WHEN status = 'cancel_requested' AND ${value} NOT IN ${FINISHED} THEN status
                           ELSE ${value} END`
          : `${column} = ${value}`,
      );
    }
  }
  if (u.started) sets.push('started_at = coalesce(started_at, now())');
  await db.query(`UPDATE fine_tunes SET ${sets.join(', ')} WHERE id = $1`, values);
}

/** Marks a job cancel_requested unless it has finished; false when it had (nothing to cancel). */
export async function requestFineTuneCancel(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE fine_tunes SET status = 'cancel_requested', updated_at = now() WHERE id = $1 AND status NOT IN ${FINISHED}`,
    [id],
  );
  return rowCount === 1;
}

/** Appends an event; with a dedup key, a retried activity's repeat is dropped. */
export async function addFineTuneEvent(
  db: Queryable,
  e: {
    jobId: string;
    type: FineTuneEventType;
    message: string;
    level?: 'info' | 'warning' | 'error';
    step?: number;
    dedupKey?: string;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO fine_tune_events (job_id, type, level, message, step, dedup_key) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (job_id, dedup_key) DO NOTHING`,
    [e.jobId, e.type, e.level ?? 'info', e.message, e.step ?? null, e.dedupKey ?? null],
  );
}

export async function listFineTuneEvents(db: Queryable, jobId: string): Promise<FineTuneEventRow[]> {
  const { rows } = await db.query<FineTuneEventRow>(
    'SELECT type, level, message, step, created_at FROM fine_tune_events WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

/** One step's measurements; a field left out keeps what an earlier write of that step stored. */
export interface StepMetric {
  step: number;
  epoch?: number;
  /** Null when the trainer measured a non-finite value (a diverged loss). */
  loss?: number | null;
  lr?: number;
  gradNorm?: number | null;
  tokens?: number;
  evalLoss?: number | null;
  rewardMargin?: number | null;
}

const METRIC_COLUMNS = ['epoch', 'loss', 'learning_rate', 'grad_norm', 'tokens', 'eval_loss', 'reward_margin'] as const;

/**
 * Stores the measurements of some steps in one statement (a trainer reports steps faster than
 * one round trip each). Writing a step again fills in what it did not have (a step's training
 * metrics, then its eval loss) and overwrites what it did (a step retrained after a resume).
 */
export async function recordMetrics(db: Queryable, jobId: string, metrics: StepMetric[]): Promise<void> {
  if (metrics.length === 0) return;
  // One row per step: ON CONFLICT cannot touch a row twice in one statement.
  const bySteps = new Map<number, StepMetric>();
  for (const m of metrics) {
    const before = bySteps.get(m.step);
    bySteps.set(
      m.step,
      before ? { ...before, ...Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined)) } : m,
    );
  }
  const values: unknown[] = [jobId];
  const rows = [...bySteps.values()].map((m) => {
    const cells = [m.step, m.epoch, m.loss, m.lr, m.gradNorm, m.tokens, m.evalLoss, m.rewardMargin].map((v) => {
      values.push(v ?? null);
      return `$${values.length}`;
    });
    return `($1, ${cells.join(', ')})`;
  });
  await db.query(
    `INSERT INTO fine_tune_metrics (job_id, step, ${METRIC_COLUMNS.join(', ')})
     VALUES ${rows.join(', ')}
     ON CONFLICT (job_id, step) DO UPDATE SET
       ${METRIC_COLUMNS.map((c) => `${c} = coalesce(EXCLUDED.${c}, fine_tune_metrics.${c})`).join(',\n       ')}`,
    values,
  );
}

export async function listMetrics(db: Queryable, jobId: string) {
  const { rows } = await db.query(
    `SELECT step, epoch, loss, learning_rate, grad_norm, tokens, eval_loss, reward_margin, logged_at
       FROM fine_tune_metrics WHERE job_id = $1 ORDER BY step`,
    [jobId],
  );
  return rows as Array<{
    step: number;
    epoch: number | null;
    loss: number | null;
    learning_rate: number | null;
    grad_norm: number | null;
    tokens: number | null;
    eval_loss: number | null;
    reward_margin: number | null;
    logged_at: Date;
  }>;
}

export async function recordCheckpoint(
  db: Queryable,
  c: {
    jobId: string;
    step: number;
    epoch?: number;
    type: 'intermediate' | 'final';
    blobPrefix: string;
    files: string[];
  },
): Promise<void> {
  await db.query(
    `INSERT INTO fine_tune_checkpoints (job_id, step, epoch, checkpoint_type, blob_prefix, files)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id, step, checkpoint_type) DO NOTHING`,
    [c.jobId, c.step, c.epoch ?? null, c.type, c.blobPrefix, JSON.stringify(c.files)],
  );
}

export async function listCheckpoints(db: Queryable, jobId: string) {
  const { rows } = await db.query(
    `SELECT c.step, c.epoch, c.checkpoint_type, c.blob_prefix, c.files, c.created_at, c.object_id, c.object_revision_id,
            c.object_name, m.name AS registry_name, p.slug AS registry_project_slug
     FROM fine_tune_checkpoints c
     LEFT JOIN registry_models m ON m.id = c.object_id
     LEFT JOIN projects p ON p.id = m.project_id
     WHERE c.job_id = $1 ORDER BY c.step, c.checkpoint_type DESC`,
    [jobId],
  );
  return rows as Array<{
    step: number;
    epoch: number | null;
    checkpoint_type: 'intermediate' | 'final';
    blob_prefix: string;
    files: string[];
    created_at: Date;
    object_id: string | null;
    object_revision_id: string | null;
    object_name: string | null;
    registry_name: string | null;
    registry_project_slug: string | null;
  }>;
}

/**
 * The qualified names of what a job registered, resolved now: `<project_slug>/<name>` of the
 * registry object, its id when the slug cannot be resolved, and the bare output name when
 * nothing was registered (a name without an id cannot be deployed).
 */
export async function resolveFineTuneObjectNames(
  db: Queryable,
  row: FineTuneRow,
): Promise<{ model_object_name: string; adapter_object_name?: string }> {
  const { rows } = await db.query<{ id: string; name: string; project_slug: string | null }>(
    `SELECT m.id, m.name, p.slug AS project_slug FROM registry_models m LEFT JOIN projects p ON p.id = m.project_id
     WHERE m.id = ANY($1)`,
    [[row.model_object_id, row.adapter_object_id].filter(Boolean)],
  );
  const name = (id: string | null, fallback: string | null) => {
    const m = rows.find((r) => r.id === id);
    if (m) return qualifiedModelName(m);
    return fallback ?? undefined;
  };
  const adapter = row.plan.training_type === 'lora' ? name(row.adapter_object_id, row.adapter_output_name) : undefined;
  return {
    model_object_name: name(row.model_object_id, row.model_output_name)!,
    ...(adapter ? { adapter_object_name: adapter } : {}),
  };
}
