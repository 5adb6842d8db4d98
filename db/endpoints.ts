/** Dedicated endpoints, their deployments and their events (SDK beta.endpoints). */
import { randomBytes } from 'node:crypto';
import type { Queryable } from './pool';

export const newEtag = () => randomBytes(8).toString('hex');

export interface EndpointRow {
  id: string;
  project_id: string;
  name: string;
  visibility: 'VISIBILITY_PRIVATE' | 'VISIBILITY_INTERNAL';
  traffic_split: Array<{ deploymentId: string; weight: number }>;
  etag: string;
  created_at: Date;
  updated_at: Date;
  created_us: string;
  active_rollout_id: string | null;
}

export interface EndpointDeploymentRow {
  id: string;
  endpoint_id: string;
  project_id: string;
  name: string;
  model: string;
  model_id: string;
  model_revision_id: string | null;
  autoscaling: Record<string, unknown>;
  enable_lora: boolean;
  hardware: string;
  container_deployment_id: string | null;
  failure: string | null;
  deleting: boolean;
  /** Operator fault injection at the gateway (rollout drills): a share of requests answered with an error. */
  fault_injection: FaultInjection | null;
  /** The deployment profile (`cr_…`) its server runs with. */
  config_id: string | null;
  etag: string;
  created_at: Date;
  updated_at: Date;
  created_us: string;
  /** The container deployment's status and replica counts (null when there is none). */
  container_status: string | null;
  desired_replicas: number | null;
  ready_replicas: number;
}

export interface FaultInjection {
  abortPercent: number;
  httpStatus: number;
}

const US = (t: string) => `(extract(epoch FROM ${t}.created_at) * 1000000)::bigint AS created_us`;

/** An endpoint's columns, with the rollout in flight on it (paused ones included; pending ones not). */
const ENDPOINT_COLUMNS = `e.*, ${US('e')},
  (SELECT r.id FROM endpoint_rollouts r WHERE r.endpoint_id = e.id
      AND r.state NOT IN ('ROLLOUT_STATE_PENDING', 'ROLLOUT_STATE_COMPLETED', 'ROLLOUT_STATE_ABORTED', 'ROLLOUT_STATE_CANCELED')
    LIMIT 1) AS active_rollout_id`;

export async function insertEndpoint(
  db: Queryable,
  e: { id: string; projectId: string; name: string; visibility: string },
): Promise<void> {
  await db.query('INSERT INTO endpoints (id, project_id, name, visibility, etag) VALUES ($1, $2, $3, $4, $5)', [
    e.id,
    e.projectId,
    e.name,
    e.visibility,
    newEtag(),
  ]);
}

export async function getEndpoint(db: Queryable, projectId: string, idOrName: string): Promise<EndpointRow | null> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM endpoints e WHERE e.project_id = $1 AND (e.id = $2 OR e.name = $2)
      ORDER BY (e.id = $2) DESC LIMIT 1`,
    [projectId, idOrName],
  );
  return rows[0] ?? null;
}

/** The endpoint a gateway model string names: `<project_slug>/<endpoint name>`. */
export async function findEndpointBySlug(
  db: Queryable,
  projectSlug: string,
  name: string,
): Promise<EndpointRow | null> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM endpoints e JOIN projects p ON p.id = e.project_id WHERE p.slug = $1 AND e.name = $2`,
    [projectSlug, name],
  );
  return rows[0] ?? null;
}

export async function listEndpoints(
  db: Queryable,
  projectId: string,
  after: { createdUs: string; id: string } | undefined,
  limit: number,
): Promise<EndpointRow[]> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM endpoints e WHERE e.project_id = $1
        AND ($2::bigint IS NULL
             OR (e.created_at, e.id) < (timestamptz 'epoch' + $2::bigint * interval '1 microsecond', $3::text))
      ORDER BY e.created_at DESC, e.id DESC LIMIT $4`,
    [projectId, after?.createdUs ?? null, after?.id ?? null, limit],
  );
  return rows;
}

export async function updateEndpoint(
  db: Queryable,
  id: string,
  set: { name?: string; visibility?: string; trafficSplit?: Array<{ deploymentId: string; weight: number }> },
): Promise<void> {
  await db.query(
    `UPDATE endpoints SET name = coalesce($2, name), visibility = coalesce($3, visibility),
            traffic_split = coalesce($4::jsonb, traffic_split), etag = $5, updated_at = now()
      WHERE id = $1`,
    [
      id,
      set.name ?? null,
      set.visibility ?? null,
      set.trafficSplit ? JSON.stringify(set.trafficSplit) : null,
      newEtag(),
    ],
  );
}

export async function deleteEndpointRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM endpoints WHERE id = $1', [id]);
}

const SELECT_DEPLOYMENT = `
  SELECT ed.*, ${US('ed')}, d.status AS container_status,
         (d.state->>'desired_replicas')::int AS desired_replicas,
         (SELECT count(*)::int FROM deployment_replicas r
           WHERE r.deployment_id = d.id AND r.status = 'Running') AS ready_replicas
    FROM endpoint_deployments ed LEFT JOIN deployments d ON d.id = ed.container_deployment_id`;

export async function insertEndpointDeployment(
  db: Queryable,
  d: {
    id: string;
    endpointId: string;
    projectId: string;
    name: string;
    model: string;
    modelId: string;
    modelRevisionId?: string;
    autoscaling: object;
    enableLora: boolean;
    hardware: string;
    containerDeploymentId?: string;
    failure?: string;
    configId?: string;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO endpoint_deployments (id, endpoint_id, project_id, name, model, model_id, model_revision_id, autoscaling,
                                       enable_lora, hardware, container_deployment_id, failure, etag, config_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
    [
      d.id,
      d.endpointId,
      d.projectId,
      d.name,
      d.model,
      d.modelId,
      d.modelRevisionId ?? null,
      JSON.stringify(d.autoscaling),
      d.enableLora,
      d.hardware,
      d.containerDeploymentId ?? null,
      d.failure ?? null,
      newEtag(),
      d.configId ?? null,
    ],
  );
}

export async function listEndpointDeployments(db: Queryable, endpointId: string): Promise<EndpointDeploymentRow[]> {
  const { rows } = await db.query<EndpointDeploymentRow>(
    `${SELECT_DEPLOYMENT} WHERE ed.endpoint_id = $1 ORDER BY ed.created_at, ed.id`,
    [endpointId],
  );
  return rows;
}

export async function getEndpointDeployment(
  db: Queryable,
  endpointId: string,
  idOrName: string,
): Promise<EndpointDeploymentRow | null> {
  const { rows } = await db.query<EndpointDeploymentRow>(
    `${SELECT_DEPLOYMENT} WHERE ed.endpoint_id = $1 AND (ed.id = $2 OR ed.name = $2) ORDER BY (ed.id = $2) DESC LIMIT 1`,
    [endpointId, idOrName],
  );
  return rows[0] ?? null;
}

export async function updateEndpointDeployment(
  db: Queryable,
  id: string,
  set: { name?: string; autoscaling?: object; deleting?: boolean },
): Promise<void> {
  await db.query(
    `UPDATE endpoint_deployments SET name = coalesce($2, name), autoscaling = coalesce($3::jsonb, autoscaling),
            deleting = coalesce($4, deleting), etag = $5, updated_at = now()
      WHERE id = $1`,
    [id, set.name ?? null, set.autoscaling ? JSON.stringify(set.autoscaling) : null, set.deleting ?? null, newEtag()],
  );
}

export async function deleteEndpointDeploymentRow(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM endpoint_deployments WHERE id = $1', [id]);
}

/** The endpoint deployment a container deployment serves, if any. */
export async function endpointDeploymentOfContainer(
  db: Queryable,
  containerDeploymentId: string,
): Promise<{ id: string; endpoint_id: string; deleting: boolean } | null> {
  const { rows } = await db.query(
    'SELECT id, endpoint_id, deleting FROM endpoint_deployments WHERE container_deployment_id = $1',
    [containerDeploymentId],
  );
  return rows[0] ?? null;
}

export interface EndpointEvent {
  endpointId: string;
  deploymentId?: string;
  level: 'LEVEL_INFO' | 'LEVEL_WARN' | 'LEVEL_ERROR';
  sourceKind: 'SOURCE_KIND_ENDPOINT' | 'SOURCE_KIND_DEPLOYMENT';
  type: string;
  message: string;
  oldReplicas?: number;
  newReplicas?: number;
  status?: string;
  /** What the event is about beyond its deployment: a rollout's id. */
  subjectId?: string;
}

export async function addEndpointEvent(db: Queryable, e: EndpointEvent): Promise<void> {
  await db.query(
    `INSERT INTO endpoint_events (endpoint_id, deployment_id, level, source_kind, type, message, old_replicas, new_replicas, status, subject_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
    [
      e.endpointId,
      e.deploymentId ?? null,
      e.level,
      e.sourceKind,
      e.type,
      e.message,
      e.oldReplicas ?? null,
      e.newReplicas ?? null,
      e.status ?? null,
      e.subjectId ?? null,
    ],
  );
}

export async function listEndpointEvents(
  db: Queryable,
  endpointId: string,
  /** Newest first; `beforeId`: the page after the one that ended with that event. */
  q: { beforeId?: number; limit: number; deploymentIds?: string[]; types?: string[]; subjectId?: string },
) {
  const { rows } = await db.query(
    `SELECT e.id::text AS id, e.endpoint_id, e.deployment_id, e.level, e.source_kind, e.type, e.message,
            e.old_replicas, e.new_replicas, e.status, e.subject_id, e.created_at
       FROM endpoint_events e
      WHERE e.endpoint_id = $1 AND ($2::bigint IS NULL OR e.id < $2)
        AND ($4::text[] IS NULL OR e.deployment_id = ANY($4))
        AND ($5::text[] IS NULL OR e.type = ANY($5))
        AND ($6::text IS NULL OR e.subject_id = $6)
      ORDER BY e.id DESC LIMIT $3`,
    [endpointId, q.beforeId ?? null, q.limit, q.deploymentIds ?? null, q.types ?? null, q.subjectId ?? null],
  );
  return rows as Array<{
    id: string;
    endpoint_id: string;
    deployment_id: string | null;
    level: string;
    source_kind: string;
    type: string;
    message: string;
    old_replicas: number | null;
    new_replicas: number | null;
    status: string | null;
    subject_id: string | null;
    created_at: Date;
  }>;
}

export async function linkContainerDeployment(db: Queryable, id: string, containerDeploymentId: string): Promise<void> {
  await db.query('UPDATE endpoint_deployments SET container_deployment_id = $2 WHERE id = $1', [
    id,
    containerDeploymentId,
  ]);
}

export async function setFaultInjection(db: Queryable, id: string, fault: FaultInjection | null): Promise<void> {
  await db.query('UPDATE endpoint_deployments SET fault_injection = $2 WHERE id = $1', [
    id,
    fault ? JSON.stringify(fault) : null,
  ]);
}

/** Any project's endpoint deployment (operator routes). */
export async function findEndpointDeploymentById(db: Queryable, id: string): Promise<EndpointDeploymentRow | null> {
  const { rows } = await db.query<EndpointDeploymentRow>(`${SELECT_DEPLOYMENT} WHERE ed.id = $1`, [id]);
  return rows[0] ?? null;
}
