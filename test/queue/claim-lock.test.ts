/**
 * The claim statement (migration 026, queue_claim_next) takes the queue's lock and lets it go in
 * one round trip. A claim that fails halfway must let it go too: a session lock left held would
 * make every later claim of that queue wait forever.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { insertDeployment } from '../../db/deployments';
import { migrate } from '../../db/migrate';
import { claimNextJob, submitJob } from '../../db/queue';
import { newId } from '../../platform/ids';
import { withScratchDatabase } from '../helpers/scratch-database';
import { createTenant } from '../helpers/tenants';

test('a claim that fails lets go of the queue; the next claim takes the job, in priority order', async () => {
  await withScratchDatabase(async (db) => {
    await migrate(db);
    const tenant = await createTenant(db);
    const deploymentId = newId('dep');
    await insertDeployment(db, { id: deploymentId, projectId: tenant.projectId, name: 'm' });
    for (const [i, priority] of [1, 5, 3].entries()) {
      assert.ok(
        await submitJob(db, {
          id: `job-${i}`,
          projectId: tenant.projectId,
          model: 'm',
          priority,
          payload: { i },
          info: {},
        }),
      );
    }
    const claim = () =>
      claimNextJob(db, { deploymentId, worker: 'w', timeoutMs: 30_000 }, async () => undefined).then(
        (c) => c?.job.id ?? null,
      );

    // The claim's UPDATE fails (a trigger stands in for anything the server may refuse).
    await db.query(`CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'claims refused'; END $$`);
    await db.query(
      `CREATE TRIGGER refuse_claims BEFORE UPDATE ON queue_jobs FOR EACH ROW EXECUTE FUNCTION refuse_claims()`,
    );
    await assert.rejects(claim(), /claims refused/);
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory'`);
    assert.equal(rows[0].n, 0, 'no session holds the queue lock after the failed claim');

    await db.query('DROP TRIGGER refuse_claims ON queue_jobs');
    assert.deepEqual([await claim(), await claim(), await claim(), await claim()], ['job-1', 'job-2', 'job-0', null]);
  });
});
