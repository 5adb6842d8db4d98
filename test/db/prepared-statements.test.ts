/**
 * The queue's hot statements are prepared once per connection (db/pool.ts preparedStatement). A
 * newer Gantry's migration may add a column to their table while this process runs: its
 * connections, with the statements already prepared, must go on working.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { insertDeployment } from '../../db/deployments';
import { migrate } from '../../db/migrate';
import { preparedStatement, type Queryable } from '../../db/pool';
import { claimJob, finishJob, getJob, submitJob, touchJob } from '../../db/queue';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

test('a connection with the queue statements prepared works on after a migration adds a column', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    await insertDeployment(db, { id: 'dep-1', projectId: tenant.projectId, name: 'm' });
    const job = { projectId: tenant.projectId, model: 'm' };

    /** A job's whole life through the queue's statements on `conn`: what a worker and a client see. */
    const lifeOfAJob = async (conn: Queryable, id: string) => {
      assert.equal(await submitJob(conn, { ...job, id, priority: 1, payload: { id }, info: {} }), 'dep-1');
      const { claim } = await claimJob(conn, { ...job, worker: 'w', timeoutMs: 30_000 });
      assert.equal(claim?.job.id, id);
      const ref = { ...job, id, token: claim.token };
      assert.deepEqual((await touchJob(conn, ref, { progress: 0.5 }))?.info, { progress: 0.5 });
      assert.equal((await finishJob(conn, ref, { status: 'done', outputs: { ok: true } }))?.status, 'done');
      const seen = await getJob(conn, job.projectId, job.model, id);
      assert.deepEqual(
        { status: seen?.status, outputs: seen?.outputs, info: seen?.info, payload: seen?.payload },
        { status: 'done', outputs: { ok: true }, info: { progress: 0.5 }, payload: { id } },
      );
    };

    const conn = await db.connect();
    try {
      await lifeOfAJob(conn, 'job-1');
      // A statement of the same connection that names no columns, prepared before the change too.
      const everyColumn = { name: 'every_column', text: 'SELECT * FROM queue_jobs WHERE id = $1', values: ['job-1'] };
      await conn.query(everyColumn);

      await db.query('ALTER TABLE queue_jobs ADD COLUMN added_by_a_newer_migration text');

      // The `*` statement's result changed under it: what preparedStatement refuses to prepare.
      await assert.rejects(conn.query(everyColumn), /cached plan must not change result type/);
      await lifeOfAJob(conn, 'job-2');
    } finally {
      conn.release(true);
    }
  });
});

test('a prepared statement must name its result columns', () => {
  for (const text of ['SELECT * FROM t', 'UPDATE t SET a = 1 RETURNING *', 'SELECT (c.row).* FROM f() c']) {
    assert.throws(() => preparedStatement('s', text), /name its result columns instead of \*/, text);
  }
  const named = preparedStatement('s', 'SELECT count(*), a * 2 FROM t WHERE id = $1');
  assert.deepEqual(named([7]), { name: 's', text: 'SELECT count(*), a * 2 FROM t WHERE id = $1', values: [7] });
});
