/** Read model of container deployments, their replicas, and deployment secrets. */
import { replicaOrigin, type DeploymentState, type DeploymentStatus } from '../shared/deployments';
import type { Queryable } from './pool';

export interface DeploymentRow {
  id: string;
  project_id: string;
  name: string;
  status: DeploymentStatus;
  state: DeploymentState;
  /** The workflow run that projected `state` (0: the first); a later run projects above it. */
  generation: number;
  created_at: Date;
  updated_at: Date;
}

export interface ReplicaRow {
  replica_id: string;
  revision: number;
  image: string;
  status: string;
  reason: string | null;
  message: string | null;
  ready_since: Date | null;
  port: number | null;
  /** The address its container host publishes it on (null: recorded before addresses, 127.0.0.1). */
  address: string | null;
  /** The container host's own task queue, where the replica is supervised. */
  host: string | null;
  updated_at: Date;
}

export async function insertDeployment(
  db: Queryable,
  d: { id: string; projectId: string; name: string; state?: DeploymentState; workflowId?: string },
): Promise<void> {
  await db.query('INSERT INTO deployments (id, project_id, name, state, workflow_id) VALUES ($1, $2, $3, $4, $5)', [
    d.id,
    d.projectId,
    d.name,
    d.state ?? {},
    d.workflowId ?? null,
  ]);
}

export async function findDeploymentByName(
  db: Queryable,
  projectId: string,
  name: string,
): Promise<{ id: string; name: string } | null> {
  const { rows } = await db.query<{ id: string; name: string }>(
    'SELECT id, name FROM deployments WHERE project_id = $1 AND name = $2',
    [projectId, name],
  );
  return rows[0] ?? null;
}

/** By id or by name (the SDK's `id` path segment is what the user knows: usually the name). */
export async function getDeployment(db: Queryable, projectId: string, idOrName: string): Promise<DeploymentRow | null> {
  const { rows } = await db.query<DeploymentRow>(
    `SELECT id, project_id, name, status, state, generation, created_at, updated_at FROM deployments
      WHERE project_id = $1 AND (id = $2 OR name = $2) ORDER BY (id = $2) DESC LIMIT 1`,
    [projectId, idOrName],
  );
  return rows[0] ?? null;
}

/** A page of the project's deployments, newest first: up to `limit` after the cursor `after` (api/cursor-pages.ts). */
export async function listDeployments(
  db: Queryable,
  projectId: string,
  after: { createdUs: string; id: string } | undefined,
  limit: number,
): Promise<Array<DeploymentRow & { created_us: string }>> {
  const { rows } = await db.query<DeploymentRow & { created_us: string }>(
    `SELECT id, project_id, name, status, state, generation, created_at, updated_at,
            (extract(epoch FROM created_at) * 1000000)::bigint AS created_us
       FROM deployments
      WHERE project_id = $1
        AND ($2::bigint IS NULL
             OR (created_at, id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3::text))
      ORDER BY created_at DESC, id DESC LIMIT $4`,
    [projectId, after?.createdUs ?? null, after?.id ?? null, limit],
  );
  return rows;
}

/**
 * The replicas a project's deployments may run at their ceiling: the sum of their max_replicas
 * (endpoint deployments' too), leaving out deployments being deleted and `excluding` (one about
 * to change).
 */
export async function projectReplicaCeiling(db: Queryable, projectId: string, excluding?: string): Promise<number> {
  const { rows } = await db.query<{ replicas: string }>(
    `SELECT COALESCE(SUM((state->'spec'->>'max_replicas')::int), 0) AS replicas FROM deployments
      WHERE project_id = $1 AND id IS DISTINCT FROM $2 AND (state->>'deleted')::boolean IS NOT TRUE`,
    [projectId, excluding ?? null],
  );
  return Number(rows[0].replicas);
}

export async function projectDeployment(
  db: Queryable,
  id: string,
  state: DeploymentState,
  version: number,
  generation = 0,
): Promise<boolean> {
  // A late write of an earlier run (or an earlier projection of this run) never overwrites a newer
  // one. Says whether it was written.
  const { rowCount } = await db.query(
    `UPDATE deployments SET state = $2, status = $3, name = $4, version = $5, generation = $6, updated_at = now()
      WHERE id = $1 AND (generation, version) <= ($6, $5)`,
    [id, state, state.status, state.spec.name, version, generation],
  );
  return rowCount === 1;
}

export async function deleteDeploymentRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM deployments WHERE id = $1', [id]);
}

/** What a replica activity records about one replica. */
export interface ReplicaRecord {
  deploymentId: string;
  replicaId: string;
  revision: number;
  image: string;
  status: string;
  reason?: string;
  message?: string;
  host?: string;
  port?: number;
  /** The address the replica's host publishes it on (GANTRY_CONTAINER_HOST_ADDRESS). */
  address?: string;
  ready?: boolean;
}

export async function upsertReplica(db: Queryable, r: ReplicaRecord): Promise<void> {
  await db.query(
    `INSERT INTO deployment_replicas (deployment_id, replica_id, revision, image, status, reason, message, host, port, address, ready_since)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $11, CASE WHEN $10 THEN now() END)
     ON CONFLICT (deployment_id, replica_id) DO UPDATE
       SET status = EXCLUDED.status, reason = EXCLUDED.reason, message = EXCLUDED.message,
           host = coalesce(EXCLUDED.host, deployment_replicas.host), port = coalesce(EXCLUDED.port, deployment_replicas.port),
           address = coalesce(EXCLUDED.address, deployment_replicas.address),
           ready_since = CASE WHEN $10 THEN coalesce(deployment_replicas.ready_since, now()) END, updated_at = now()`,
    [
      r.deploymentId,
      r.replicaId,
      r.revision,
      r.image,
      r.status,
      r.reason ?? null,
      r.message ?? null,
      r.host ?? null,
      r.port ?? null,
      r.ready ?? false,
      r.address ?? null,
    ],
  );
}

/** The statuses of a replica that is over (stopped, crashed, lost with its host, refused its config). */
const ENDED_REPLICA_STATUSES = ['Exited', 'Failed', 'Terminated', 'Lost'];

/**
 * Forgets all but the `keep` most recent ended replicas of a deployment: every replacement is a new
 * replica, so a deployment that crashes for days would otherwise list thousands in its
 * replica_events. Replicas that are starting or running are always kept.
 */
export async function pruneEndedReplicas(db: Queryable, deploymentId: string, keep = 20): Promise<void> {
  await db.query(
    `DELETE FROM deployment_replicas
      WHERE deployment_id = $1 AND status = ANY($2)
        AND replica_id NOT IN (
          SELECT replica_id FROM deployment_replicas
           WHERE deployment_id = $1 AND status = ANY($2)
           ORDER BY updated_at DESC, replica_id DESC LIMIT $3)`,
    [deploymentId, ENDED_REPLICA_STATUSES, keep],
  );
}

/**
 * Of the deployments `ids`, those that still exist, each with the replicas it still lists (what the
 * logs route can show): a host's log housekeeping removes the rest (replica-log-keeper.ts).
 */
export async function listedReplicas(db: Queryable, ids: string[]): Promise<Map<string, Set<string>>> {
  const { rows } = await db.query<{ id: string; replica_id: string | null }>(
    `SELECT d.id, r.replica_id FROM deployments d LEFT JOIN deployment_replicas r ON r.deployment_id = d.id
      WHERE d.id = ANY($1)`,
    [ids],
  );
  const listed = new Map<string, Set<string>>();
  for (const r of rows) {
    const replicas = listed.get(r.id) ?? new Set<string>();
    if (r.replica_id) replicas.add(r.replica_id);
    listed.set(r.id, replicas);
  }
  return listed;
}

/** How recent another crash of the same revision must be for a crash to be part of a loop. */
const CRASH_LOOP_WINDOW = "interval '10 minutes'";
/** The reasons of a replica that crashed (as opposed to one stopped, lost with its host, or refused its config). */
const CRASH_REASONS = ['StartFailed', 'ProcessExited', 'CrashLoopBackOff'];

/**
 * Records a replica that crashed: its process exited, or it never became healthy. When another
 * replica of the same deployment and revision crashed within the last 10 minutes, the revision is
 * crash looping, and the reason recorded is `CrashLoopBackOff` (Kubernetes' word, which the
 * official CLI's `jig deploy` watches for to stop waiting and show the replica's logs); the message
 * keeps what happened to this one.
 */
export async function recordReplicaCrash(
  db: Queryable,
  r: ReplicaRecord & { reason: 'StartFailed' | 'ProcessExited'; message: string },
): Promise<void> {
  const { rows } = await db.query<{ crashes: string }>(
    `SELECT count(*) AS crashes FROM deployment_replicas
      WHERE deployment_id = $1 AND revision = $2 AND replica_id <> $3 AND reason = ANY($4)
        AND updated_at > now() - ${CRASH_LOOP_WINDOW}`,
    [r.deploymentId, r.revision, r.replicaId, CRASH_REASONS],
  );
  const before = Number(rows[0].crashes);
  const looping = before > 0;
  await upsertReplica(db, {
    ...r,
    reason: looping ? 'CrashLoopBackOff' : r.reason,
    message: looping
      ? `${r.message}; ${before + 1} replicas of revision ${r.revision} crashed in the last 10 minutes, ` +
        'so each replacement waits longer'
      : r.message,
  });
}

/**
 * The replicas of a deployment still `Starting` other than `replicaId`, recorded `Lost`: a
 * deployment launches one replica at a time, so another still starting is one whose launch ended
 * with its host (killed mid-pull or mid-start; the launch's heartbeat timed out and its run went
 * on). A container that launch had started is a survivor of its host, stopped and recorded by the
 * host that finds it (activities/deployments.ts).
 */
export async function recordUnfinishedLaunches(db: Queryable, deploymentId: string, replicaId: string): Promise<void> {
  await db.query(
    `UPDATE deployment_replicas
        SET status = 'Lost', reason = 'HostLost', ready_since = NULL, updated_at = now(),
            message = 'its launch did not finish: its host (' || coalesce(host, 'unknown') || ') went away'
      WHERE deployment_id = $1 AND replica_id <> $2 AND status = 'Starting'`,
    [deploymentId, replicaId],
  );
}

/** Changes the status of a replica the row of which exists (a deleted deployment's replicas have none). */
export async function updateReplicaStatus(
  db: Queryable,
  r: { deploymentId: string; replicaId: string; status: string; reason: string; message: string },
): Promise<void> {
  await db.query(
    `UPDATE deployment_replicas SET status = $3, reason = $4, message = $5, ready_since = NULL, updated_at = now()
      WHERE deployment_id = $1 AND replica_id = $2`,
    [r.deploymentId, r.replicaId, r.status, r.reason, r.message],
  );
}

export async function listReplicas(db: Queryable, deploymentId: string): Promise<ReplicaRow[]> {
  const { rows } = await db.query<ReplicaRow>(
    `SELECT replica_id, revision, image, status, reason, message, ready_since, port, address, host, updated_at
       FROM deployment_replicas WHERE deployment_id = $1 ORDER BY replica_id`,
    [deploymentId],
  );
  return rows;
}

// ---- secrets ----

export interface SecretRow {
  id: string;
  name: string;
  description: string | null;
  created_by: string;
  last_updated_by: string;
  created_at: Date;
  updated_at: Date;
}
const SECRET_COLUMNS = 'id, name, description, created_by, last_updated_by, created_at, updated_at';

export async function insertSecret(
  db: Queryable,
  s: { id: string; projectId: string; name: string; description?: string; sealed: Buffer; by: string },
): Promise<void> {
  await db.query(
    `INSERT INTO deployment_secrets (id, project_id, name, description, sealed_value, created_by, last_updated_by)
     VALUES ($1, $2, $3, $4, $5, $6, $6)`,
    [s.id, s.projectId, s.name, s.description ?? null, s.sealed, s.by],
  );
}

export async function getSecret(db: Queryable, projectId: string, idOrName: string): Promise<SecretRow | null> {
  const { rows } = await db.query<SecretRow>(
    `SELECT ${SECRET_COLUMNS} FROM deployment_secrets WHERE project_id = $1 AND (id = $2 OR name = $2)`,
    [projectId, idOrName],
  );
  return rows[0] ?? null;
}

export async function listSecrets(db: Queryable, projectId: string): Promise<SecretRow[]> {
  const { rows } = await db.query<SecretRow>(
    `SELECT ${SECRET_COLUMNS} FROM deployment_secrets WHERE project_id = $1 ORDER BY name`,
    [projectId],
  );
  return rows;
}

export async function updateSecret(
  db: Queryable,
  id: string,
  u: { name?: string; description?: string; sealed?: Buffer; by: string },
): Promise<void> {
  await db.query(
    `UPDATE deployment_secrets
        SET name = coalesce($2, name), description = coalesce($3, description),
            sealed_value = coalesce($4, sealed_value), last_updated_by = $5, updated_at = now()
      WHERE id = $1`,
    [id, u.name ?? null, u.description ?? null, u.sealed ?? null, u.by],
  );
}

export async function deleteSecret(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM deployment_secrets WHERE id = $1', [id]);
}

/** A secret's sealed value and the row it is sealed for (db/sealed-values.ts opens it there only). */
export interface SealedSecret {
  id: string;
  sealed: Buffer;
}

/** Sealed values of the named secrets of a project, by name (for the replica that needs them, nothing else). */
export async function sealedSecrets(
  db: Queryable,
  projectId: string,
  names: string[],
): Promise<Map<string, SealedSecret>> {
  const { rows } = await db.query<{ id: string; name: string; sealed_value: Buffer }>(
    'SELECT id, name, sealed_value FROM deployment_secrets WHERE project_id = $1 AND name = ANY($2)',
    [projectId, names],
  );
  return new Map(rows.map((r) => [r.name, { id: r.id, sealed: r.sealed_value }]));
}

// ---- request counts (the gateway's proxy) ----

export async function requestsSince(db: Queryable, deploymentId: string, seconds: number): Promise<number> {
  const { rows } = await db.query<{ n: string | null }>(
    `SELECT sum(requests) AS n FROM deployment_request_counts
      WHERE deployment_id = $1 AND second > now() - make_interval(secs => $2)`,
    [deploymentId, seconds],
  );
  return Number(rows[0].n ?? 0);
}

/** Mean milliseconds the deployment's answered requests took over the last `seconds`; null when none was answered. */
export async function meanRequestMsSince(db: Queryable, deploymentId: string, seconds: number): Promise<number | null> {
  const { rows } = await db.query<{ mean: number | null }>(
    `SELECT sum(duration_ms) / nullif(sum(answered), 0) AS mean FROM deployment_request_counts
      WHERE deployment_id = $1 AND second > now() - make_interval(secs => $2)`,
    [deploymentId, seconds],
  );
  return rows[0].mean === null ? null : Number(rows[0].mean);
}

/**
 * Where the deployment's running replicas answer (replicaOrigin), in replica order: for the gateway,
 * metric scrapes and adapter loads. `onHost`: only those supervised on that container host's queue.
 */
export async function runningReplicaOrigins(db: Queryable, deploymentId: string, onHost?: string): Promise<string[]> {
  const { rows } = await db.query<{ address: string | null; port: number }>(
    `SELECT address, port FROM deployment_replicas
      WHERE deployment_id = $1 AND status = 'Running' AND port IS NOT NULL AND ($2::text IS NULL OR host = $2)
      ORDER BY replica_id`,
    [deploymentId, onHost ?? null],
  );
  return rows.map((r) => replicaOrigin(r.address, r.port));
}

/** The container hosts (their own task queues) that hold running replicas of the deployment, with how many each. */
export async function hostsOfRunningReplicas(
  db: Queryable,
  deploymentId: string,
): Promise<Array<{ hostQueue: string; replicas: number }>> {
  const { rows } = await db.query<{ host: string; replicas: number }>(
    `SELECT host, count(*)::int AS replicas FROM deployment_replicas
      WHERE deployment_id = $1 AND status = 'Running' AND port IS NOT NULL AND host IS NOT NULL
      GROUP BY host ORDER BY host`,
    [deploymentId],
  );
  return rows.map((r) => ({ hostQueue: r.host, replicas: r.replicas }));
}
