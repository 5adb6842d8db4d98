/**
 * A container deployment's revision history (migration 027): the spec of each revision its
 * workflow counted, newest first, the 50 newest kept.
 */
import type { Queryable } from './pool';
import { changesReplicaTemplate, type DeploymentSpec } from '../shared/deployments';

/** How many revisions keep their spec; older ones go (the SDK documents the same bound). */
export const RETAINED_REVISIONS = 50;

export type RevisionAction = 'create' | 'update' | 'rollback';

export interface RevisionRow {
  deployment_id: string;
  revision: number;
  action: RevisionAction;
  rolled_back_to: number | null;
  spec: DeploymentSpec;
  created_at: Date;
}

/**
 * Records a revision the first time a projection shows it (a later or repeated projection of the
 * same revision changes nothing). A revision whose replica template is that of an earlier one
 * (a rollback through the API, or a change that puts the same template back) is recorded as a
 * rollback to the newest such revision.
 */
export async function recordRevision(
  db: Queryable,
  r: { deploymentId: string; revision: number; spec: DeploymentSpec },
): Promise<void> {
  // Most projections show a revision already recorded: one statement, which inserts nothing. A
  // late projection of a deployment whose row is gone inserts nothing either (a foreign-key error
  // would fail the projection activity on every retry).
  const { rowCount } = await db.query(
    `INSERT INTO deployment_revisions (deployment_id, revision, action, spec)
     SELECT id, $2, $3, $4 FROM deployments WHERE id = $1
     ON CONFLICT DO NOTHING`,
    [r.deploymentId, r.revision, r.revision === 1 ? 'create' : 'update', r.spec],
  );
  if (!rowCount) return;
  const earlier = await db.query<{ revision: number; spec: DeploymentSpec }>(
    'SELECT revision, spec FROM deployment_revisions WHERE deployment_id = $1 AND revision < $2 ORDER BY revision DESC',
    [r.deploymentId, r.revision],
  );
  const same = earlier.rows.find((e) => !changesReplicaTemplate(e.spec, r.spec));
  if (same) {
    await db.query(
      `UPDATE deployment_revisions SET action = 'rollback', rolled_back_to = $3 WHERE deployment_id = $1 AND revision = $2`,
      [r.deploymentId, r.revision, same.revision],
    );
  }
  await db.query('DELETE FROM deployment_revisions WHERE deployment_id = $1 AND revision <= $2', [
    r.deploymentId,
    r.revision - RETAINED_REVISIONS,
  ]);
}

export async function listRevisions(
  db: Queryable,
  deploymentId: string,
  page: { before?: number; limit: number },
): Promise<RevisionRow[]> {
  const { rows } = await db.query<RevisionRow>(
    `SELECT * FROM deployment_revisions WHERE deployment_id = $1 AND ($2::integer IS NULL OR revision < $2)
      ORDER BY revision DESC LIMIT $3`,
    [deploymentId, page.before ?? null, page.limit],
  );
  return rows;
}

export async function getRevision(db: Queryable, deploymentId: string, revision: number): Promise<RevisionRow | null> {
  const { rows } = await db.query<RevisionRow>(
    'SELECT * FROM deployment_revisions WHERE deployment_id = $1 AND revision = $2',
    [deploymentId, revision],
  );
  return rows[0] ?? null;
}
