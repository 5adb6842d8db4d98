/**
 * A worker's report with claim_next is one statement (db/queue.ts finishJobAndClaimNext): the
 * outcome, then the next job in priority order, committed together; nothing is claimed for a
 * report whose claim is lost. The statement locks the finished job before the queue dispatcher's
 * row; the dispatcher's sweep locks them the other way round, so it must skip a lapsed job that a
 * report holds rather than wait for it (else the two wait for each other until PostgreSQL aborts
 * one as a deadlock).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { claimJob, finishJob, finishJobAndClaimNext, getJob, sweepQueue } from '../../db/queue';
import { lockWaitOrDone, withScratchDatabase } from '../helpers/scratch-database';
import { scratchQueue } from '../helpers/scratch-queue';

test('a report with claim_next finishes its job and claims the next in order; a lost claim claims nothing', async () => {
  await withScratchDatabase(async (db) => {
    const { projectId, deploymentId, claimOf } = await scratchQueue(db, [1, 5, 3]);
    const first = (await claimJob(db, claimOf)).claim!;
    assert.equal(first.job.id, 'job-1');
    const ref = (claim: { job: { id: string }; token: string }) => ({
      projectId,
      model: 'm',
      id: claim.job.id,
      token: claim.token,
    });

    const both = await finishJobAndClaimNext(
      db,
      ref(first),
      { status: 'done', outputs: { ok: true }, info: { seen: 1 } },
      claimOf,
    );
    assert.ok(both);
    assert.equal(both.job.id, 'job-1');
    assert.equal(both.job.status, 'done');
    assert.deepEqual(both.job.outputs, { ok: true });
    assert.deepEqual(both.job.info, { seen: 1 });
    assert.equal(both.next.deploymentId, deploymentId);
    assert.equal(both.next.claim?.job.id, 'job-2', 'the next job by priority');
    assert.equal(both.next.claim?.job.status, 'running');
    assert.equal((await getJob(db, projectId, 'm', 'job-2'))?.claim_token, both.next.claim?.token);

    // The first claim again (its outcome is made, so the claim is no longer running): nothing is
    // finished or claimed, and the last job stays pending for the next worker.
    assert.equal(await finishJobAndClaimNext(db, ref(first), { status: 'done' }, claimOf), null);
    assert.equal((await getJob(db, projectId, 'm', 'job-0'))?.status, 'pending');

    const failed = await finishJobAndClaimNext(db, ref(both.next.claim!), { status: 'failed', error: 'no' }, claimOf);
    assert.equal(failed?.job.status, 'failed');
    assert.equal(failed?.job.error, 'no');
    assert.equal(failed?.next.claim?.job.id, 'job-0');
    const last = await finishJobAndClaimNext(db, ref(failed!.next.claim!), { status: 'done' }, claimOf);
    assert.equal(last?.job.status, 'done');
    assert.deepEqual(last?.next, { deploymentId, claim: null, wakeDispatcher: false }, 'the queue is empty');
  });
});

test('a report whose next claim fails makes nothing: its outcome is not recorded either, and the same report goes through after', async () => {
  await withScratchDatabase(async (db) => {
    const { projectId, claimOf } = await scratchQueue(db, [1, 1]);
    const first = (await claimJob(db, claimOf)).claim!;
    const ref = { projectId, model: 'm', id: first.job.id, token: first.token };
    // The claim's UPDATE fails (a trigger stands in for anything the server may refuse); the finish's would not.
    await db.query(`CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'claims refused'; END $$`);
    await db.query(`CREATE TRIGGER refuse_claims BEFORE UPDATE ON queue_jobs FOR EACH ROW
      WHEN (NEW.status = 'running' AND OLD.status = 'pending') EXECUTE FUNCTION refuse_claims()`);
    await assert.rejects(
      finishJobAndClaimNext(db, ref, { status: 'done', outputs: { n: 1 } }, claimOf),
      /claims refused/,
    );
    const unchanged = await getJob(db, projectId, 'm', first.job.id);
    assert.equal(unchanged?.status, 'running', 'the outcome went with the failed claim');
    assert.equal(unchanged?.outputs, null);
    assert.equal((await getJob(db, projectId, 'm', 'job-1'))?.status, 'pending');

    // The worker reports again (as worker-kit does until the API takes it): now both are made.
    await db.query('DROP TRIGGER refuse_claims ON queue_jobs');
    const both = await finishJobAndClaimNext(db, ref, { status: 'done', outputs: { n: 1 } }, claimOf);
    assert.equal(both?.job.status, 'done');
    assert.deepEqual(both?.job.outputs, { n: 1 });
    assert.equal(both?.next.claim?.job.id, 'job-1');
  });
});

test("the dispatcher's sweep passes over a lapsed job that a report holds, instead of waiting for it", async () => {
  await withScratchDatabase(async (db) => {
    const { projectId, deploymentId, claimOf } = await scratchQueue(db, [1, 1]);
    const lapsing = (await claimJob(db, { ...claimOf, timeoutMs: 1 })).claim!;
    await new Promise((r) => setTimeout(r, 20)); // the 1 ms claim is past its deadline

    // A report on the lapsed claim, as finishJobAndClaimNext makes it: the finish (locking the job)
    // and then the claim (locking the dispatcher's row), in one transaction. Here it stops between
    // the two while the dispatcher sweeps.
    const report = await db.connect();
    try {
      await report.query('BEGIN');
      const ref = { projectId, model: 'm', id: lapsing.job.id, token: lapsing.token };
      assert.equal((await finishJob(report, ref, { status: 'done' }))?.status, 'done');

      let swept: Awaited<ReturnType<typeof sweepQueue>> | undefined;
      const sweep = sweepQueue(db, deploymentId, 3600).then((s) => (swept = s));
      await lockWaitOrDone(db, () => swept !== undefined);
      assert.ok(swept, 'the sweep finished while the report held the lapsed job (it did not wait for it)');
      await sweep;
      assert.equal(swept.requeued, 0, 'the job being reported on is not put back');
      assert.equal(swept.nextInMs, 0, 'the sweep looks again at once: the held job is still due');

      const next = await claimJob(report, claimOf);
      assert.equal(next.claim?.job.id, 'job-1');
      await report.query('COMMIT');
    } finally {
      await report.query('ROLLBACK'); // after a failed assertion; after the COMMIT it changes nothing
      report.release();
    }
    const reported = await getJob(db, projectId, 'm', 'job-0');
    assert.equal(reported?.status, 'done');
    assert.equal(reported?.retries, 0);
    assert.equal((await getJob(db, projectId, 'm', 'job-1'))?.status, 'running');
  });
});
