/** LoRA adapters attached to endpoint deployments, as their load workflows project them. */
import type { Queryable } from './pool';

export type AdapterLoadState =
  | 'ADAPTER_LOAD_STATE_PENDING'
  | 'ADAPTER_LOAD_STATE_LOADING'
  | 'ADAPTER_LOAD_STATE_READY'
  | 'ADAPTER_LOAD_STATE_REMOVING'
  | 'ADAPTER_LOAD_STATE_FAILED';

export interface AdapterRow {
  deployment_id: string;
  adapter_model_id: string;
  desired_revision_id: string;
  etag: string;
  cluster_id: string;
  state: AdapterLoadState;
  ready_pods: number;
  failed_pods: number;
  total_pods: number;
  realized_revision_id: string | null;
  realized_etag: string | null;
  adapter_valid: boolean;
  adapter_valid_reason: string | null;
  reason: string | null;
  message: string | null;
  loaded_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertAdapter(
  db: Queryable,
  a: {
    deploymentId: string;
    adapterModelId: string;
    revisionId: string;
    etag: string;
    valid: boolean;
    validReason?: string;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO endpoint_adapters (deployment_id, adapter_model_id, desired_revision_id, etag, adapter_valid, adapter_valid_reason)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [a.deploymentId, a.adapterModelId, a.revisionId, a.etag, a.valid, a.validReason ?? null],
  );
}

export async function getAdapter(
  db: Queryable,
  deploymentId: string,
  adapterModelId: string,
): Promise<AdapterRow | null> {
  const { rows } = await db.query<AdapterRow>(
    'SELECT * FROM endpoint_adapters WHERE deployment_id = $1 AND adapter_model_id = $2',
    [deploymentId, adapterModelId],
  );
  return rows[0] ?? null;
}

export async function listAdapters(
  db: Queryable,
  deploymentId: string,
  afterId: string | undefined,
  limit: number,
): Promise<AdapterRow[]> {
  const { rows } = await db.query<AdapterRow>(
    `SELECT * FROM endpoint_adapters WHERE deployment_id = $1 AND ($2::text IS NULL OR adapter_model_id > $2)
      ORDER BY adapter_model_id LIMIT $3`,
    [deploymentId, afterId ?? null, limit],
  );
  return rows;
}

export async function setDesiredRevision(
  db: Queryable,
  deploymentId: string,
  adapterModelId: string,
  revisionId: string,
  etag: string,
) {
  await db.query(
    `UPDATE endpoint_adapters SET desired_revision_id = $3, etag = $4, state = 'ADAPTER_LOAD_STATE_PENDING', updated_at = now()
      WHERE deployment_id = $1 AND adapter_model_id = $2`,
    [deploymentId, adapterModelId, revisionId, etag],
  );
}

export async function recordAdapterLoad(
  db: Queryable,
  a: {
    deploymentId: string;
    adapterModelId: string;
    state: AdapterLoadState;
    ready?: number;
    failed?: number;
    total?: number;
    realizedRevisionId?: string;
    realizedEtag?: string;
    reason?: string;
    message?: string;
  },
): Promise<void> {
  await db.query(
    `UPDATE endpoint_adapters
        SET state = $3, ready_pods = coalesce($4, ready_pods), failed_pods = coalesce($5, failed_pods),
            total_pods = coalesce($6, total_pods), realized_revision_id = coalesce($7, realized_revision_id),
            realized_etag = coalesce($8, realized_etag), reason = $9, message = $10,
            loaded_at = CASE WHEN $3 = 'ADAPTER_LOAD_STATE_READY' THEN coalesce(loaded_at, now()) ELSE loaded_at END,
            updated_at = now()
      WHERE deployment_id = $1 AND adapter_model_id = $2`,
    [
      a.deploymentId,
      a.adapterModelId,
      a.state,
      a.ready ?? null,
      a.failed ?? null,
      a.total ?? null,
      a.realizedRevisionId ?? null,
      a.realizedEtag ?? null,
      a.reason ?? null,
      a.message ?? null,
    ],
  );
}

export async function deleteAdapterRow(db: Queryable, deploymentId: string, adapterModelId: string): Promise<void> {
  await db.query('DELETE FROM endpoint_adapters WHERE deployment_id = $1 AND adapter_model_id = $2', [
    deploymentId,
    adapterModelId,
  ]);
}

/** Of these endpoint deployments, the ones with a valid adapter of that id or name attached: deployment -> adapter id. */
export async function deploymentsWithAdapter(
  db: Queryable,
  projectId: string,
  deploymentIds: string[],
  adapter: string,
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ deployment_id: string; adapter_model_id: string }>(
    `SELECT a.deployment_id, a.adapter_model_id FROM endpoint_adapters a
       JOIN registry_models m ON m.id = a.adapter_model_id
      WHERE a.deployment_id = ANY($1) AND a.adapter_valid AND m.project_id = $2
        AND (m.id = $3 OR m.name = $3 OR m.name = split_part($3, '/', 2))`,
    [deploymentIds, projectId, adapter],
  );
  return new Map(rows.map((r) => [r.deployment_id, r.adapter_model_id]));
}
