/** Deployment profiles (`cr_…`, SDK beta.models.configs): public ones and a project's own. */
import type { Queryable } from './pool';

export interface ModelConfigRow {
  id: string;
  project_id: string | null;
  family: string;
  selectors: Array<{ key: string; value: string }>;
  created_at: Date;
  created_us: string;
}

const SELECT = `SELECT c.*, (extract(epoch FROM c.created_at) * 1000000)::bigint AS created_us FROM model_configs c`;
const VISIBLE = '(c.project_id IS NULL OR c.project_id = $1)';

/** The profiles a project sees, oldest first, optionally of one family. */
export async function listModelConfigs(
  db: Queryable,
  projectId: string,
  q: { family?: string; after?: { createdUs: string; id: string }; limit: number },
): Promise<ModelConfigRow[]> {
  const { rows } = await db.query<ModelConfigRow>(
    `${SELECT} WHERE ${VISIBLE} AND ($2::text IS NULL OR c.family = $2)
        AND ($3::bigint IS NULL
             OR (c.created_at, c.id) > (timestamptz 'epoch' + $3::bigint * interval '1 microsecond', $4::text))
      ORDER BY c.created_at, c.id LIMIT $5`,
    [projectId, q.family ?? null, q.after?.createdUs ?? null, q.after?.id ?? null, q.limit],
  );
  return rows;
}

export async function getModelConfig(db: Queryable, projectId: string, id: string): Promise<ModelConfigRow | null> {
  const { rows } = await db.query<ModelConfigRow>(`${SELECT} WHERE ${VISIBLE} AND c.id = $2`, [projectId, id]);
  return rows[0] ?? null;
}

export async function insertModelConfig(
  db: Queryable,
  c: { id: string; projectId: string | null; family: string; selectors: Array<{ key: string; value: string }> },
): Promise<void> {
  await db.query('INSERT INTO model_configs (id, project_id, family, selectors) VALUES ($1, $2, $3, $4)', [
    c.id,
    c.projectId,
    c.family,
    JSON.stringify(c.selectors),
  ]);
}
