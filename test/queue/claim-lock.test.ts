/**
 * The claim statement (migrations 026 and 028) takes the queue's lock and lets it go in one round
 * trip. A claim that fails halfway must let it go too: a session lock left held would make every
 * later claim of that queue wait forever. A claim whose dispatcher cannot be woken is given back.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { claimJob, getJob, releaseClaim, submitJob } from '../../db/queue';
import { withScratchDatabase } from '../helpers/scratch-database';
import { scratchQueue } from '../helpers/scratch-queue';

test('a claim that fails lets go of the queue; the next claim takes the job, in priority order', async () => {
  await withScratchDatabase(async (db) => {
    const { claimOf } = await scratchQueue(db, [1, 5, 3]);
    const claim = () => claimJob(db, claimOf).then((c) => c.claim?.job.id ?? null);

    // The claim's UPDATE fails (a trigger stands in for anything the server may refuse).
    await db.query(`CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'claims refused'; END $$`);
    await db.query(
      `CREATE TRIGGER refuse_claims BEFORE UPDATE ON queue_jobs FOR EACH ROW EXECUTE FUNCTION refuse_claims()`,
    );
    await assert.rejects(claim(), /claims refused/);
    // This database's only: pg_locks shows the whole server's, and other test files claim side by side.
    const { rows } = await db.query(
      `SELECT count(*)::int AS n FROM pg_locks
        WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    );
    assert.equal(rows[0].n, 0, 'no session holds the queue lock after the failed claim');

    await db.query('DROP TRIGGER refuse_claims ON queue_jobs');
    assert.deepEqual([await claim(), await claim(), await claim(), await claim()], ['job-1', 'job-2', 'job-0', null]);
  });
});

test('a claim given back before its worker saw it is pending again, first in line, with no retry counted', async () => {
  await withScratchDatabase(async (db) => {
    const { projectId, deploymentId, claimOf } = await scratchQueue(db);
    assert.deepEqual(await claimJob(db, { ...claimOf, model: 'absent' }), {
      deploymentId: null,
      claim: null,
      wakeDispatcher: false,
    });
    assert.deepEqual(await claimJob(db, claimOf), { deploymentId, claim: null, wakeDispatcher: false });
    for (const id of ['first', 'second']) {
      assert.ok(await submitJob(db, { id, projectId: projectId, model: 'm', priority: 1, payload: {}, info: {} }));
    }

    // The queue's first claim: no dispatcher watches it yet, so it must be woken.
    const first = await claimJob(db, claimOf);
    assert.equal(first.deploymentId, deploymentId);
    assert.equal(first.claim?.job.id, 'first');
    assert.equal(first.wakeDispatcher, true);
    // The dispatcher now looks by the first claim's deadline; a later deadline needs no wake.
    const second = await claimJob(db, claimOf);
    assert.equal(second.claim?.job.id, 'second');
    assert.equal(second.wakeDispatcher, false);

    // Waking failed: the first job goes back, and the next claim wakes the dispatcher again.
    await releaseClaim(db, deploymentId, first.claim!);
    const job = await getJob(db, projectId, 'm', 'first');
    assert.equal(job?.status, 'pending');
    assert.equal(job?.retries, 0);
    assert.equal(job?.claim_token, null);
    assert.match(job?.history.at(-1)?.note ?? '', /dispatcher could not be reached/);
    const again = await claimJob(db, claimOf);
    assert.equal(again.claim?.job.id, 'first');
    assert.equal(again.wakeDispatcher, true);
  });
});
