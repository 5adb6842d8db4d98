/**
 * The job queue through the API and the worker protocol: the spec's rules
 * for submit, status, cancel, clear and metrics; strict priority order with
 * several workers claiming at once; claim timeouts, retries and info that
 * accumulates; a worker process killed mid-job; project isolation.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { queueDispatcherWorkflowId } from '../../shared/deployments';
import { newId } from '../../platform/ids';
import { insertDeployment } from '../../db/deployments';
import { QueueWorker } from '../../worker-kit/queue-worker';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_QUEUE_MAX_PAYLOAD_BYTES: '4096' } });
  t = await createTenant(p.db);
});
after(() => p.stop());

async function deployment(tenant = t): Promise<string> {
  const name = `model-${newId('d').slice(2, 10)}`;
  await insertDeployment(p.db, { id: newId('dep'), projectId: tenant.projectId, name });
  return name;
}
const post = (path: string, json: unknown, key = t.key) => call(p.baseUrl, 'POST', `/v1/queue/${path}`, { key, json });
const status = (model: string, id: string, key = t.key) =>
  call(p.baseUrl, 'GET', `/v1/queue/status?model=${model}&request_id=${id}`, { key });
async function submit(model: string, payload: object, extra: object = {}): Promise<string> {
  const res = await post('submit', { model, payload, ...extra });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.request_id, res.body.requestId);
  return res.body.request_id;
}

describe('queue API', () => {
  test('submit, status, metrics, cancel and clear follow the spec', async () => {
    const model = await deployment();
    const a = await submit(model, { op: 'echo', value: 1 }, { priority: 5, info: { tag: 'a' } });
    const b = await submit(model, { op: 'echo', value: 2 });
    const s = await status(model, a);
    assert.equal(s.status, 200);
    assert.equal(s.body.status, 'pending');
    assert.equal(s.body.priority, 5);
    assert.deepEqual(s.body.info, { tag: 'a' });
    assert.deepEqual(s.body.inputs, { op: 'echo', value: 1 });
    assert.equal(s.body.retries, 0);
    assert.ok(s.body.created_at);
    const m = await call(p.baseUrl, 'GET', `/v1/queue/metrics?model=${model}`, { key: t.key });
    assert.deepEqual(m.body, { messages_waiting: 2, messages_running: 0, total_jobs: 2 });

    // A running job cannot be canceled: 409 and its status unchanged.
    const claim = await post('claim', { model, claim_timeout_seconds: 30 });
    assert.equal(claim.body.request_id, a, 'the higher priority first');
    const refused = await post('cancel', { model, request_id: a });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.status, 'running');
    assert.equal((await status(model, a)).body.status, 'running');

    const c = await submit(model, { op: 'echo' });
    const cancel = await post('cancel', { model, request_id: b });
    assert.deepEqual(cancel.body, { status: 'canceled' });
    const again = await post('cancel', { model, request_id: b });
    assert.equal(again.status, 409);
    assert.equal(again.body.status, 'canceled');
    const cleared = await post('clear', { model });
    assert.deepEqual(cleared.body, { canceled_count: 1 });
    assert.equal((await status(model, c)).body.status, 'canceled');
    assert.equal((await status(model, a)).body.status, 'running', 'clear leaves running jobs alone');

    const done = await post('complete', {
      model,
      request_id: a,
      claim_token: claim.body.claim_token,
      outputs: { ok: true },
    });
    assert.equal(done.body.status, 'done');
    const final = (await status(model, a)).body;
    assert.deepEqual(final.outputs, { ok: true });
    assert.ok(final.claimed_at && final.done_at);
    const m2 = await call(p.baseUrl, 'GET', `/v1/queue/metrics?model=${model}`, { key: t.key });
    assert.deepEqual(m2.body, { messages_waiting: 0, messages_running: 0, total_jobs: 0 });
  });

  test('bad input gets clear errors', async () => {
    const model = await deployment();
    const unknown = await post('submit', { model: 'no-such-model', payload: {} });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'model_not_found');
    const big = await post('submit', { model, payload: { blob: 'x'.repeat(5000) } });
    assert.equal(big.status, 413);
    assert.equal(big.body.error.param, 'payload');
    const frac = await post('submit', { model, payload: {}, priority: 1.5 });
    assert.equal(frac.status, 400);
    assert.equal(frac.body.error.param, 'priority');
    const notObject = await post('submit', { model, payload: [1, 2] });
    assert.equal(notObject.body.error.param, 'payload');
    const missing = await post('cancel', { model, request_id: 'job-nope' });
    assert.equal(missing.status, 404);
    const noKey = await call(p.baseUrl, 'POST', '/v1/queue/submit', { json: { model, payload: {} } });
    assert.equal(noKey.status, 401);
    const badKey = await call(p.baseUrl, 'GET', `/v1/queue/status?model=${model}&request_id=x`, { key: 'wrong' });
    assert.equal(badKey.status, 401);
    const empty = await post('claim', { model });
    assert.equal(empty.status, 204, 'an empty queue answers 204');
  });

  test('strict priority order, FIFO within a priority, with four workers claiming at once', async () => {
    const model = await deployment();
    const priorities = [0, 7, -3, 7, 2 ** 40, 0, 1, -3, 7, 1, 0, 2 ** 40, -(2 ** 40), 5, 5, 0];
    const submitted: Array<{ id: string; priority: number; i: number }> = [];
    for (let round = 0; round < 4; round++) {
      for (const [i, priority] of priorities.entries()) {
        submitted.push({
          id: await submit(model, { op: 'echo', value: i }, { priority }),
          priority,
          i: submitted.length,
        });
      }
    }
    const claims: string[] = [];
    const workers = Array.from(
      { length: 4 },
      (_, w) => new QueueWorker({ baseUrl: p.baseUrl, apiKey: t.key, model, workerId: `w${w}`, waitSeconds: 0 }),
    );
    await Promise.all(
      workers.map(async (w) => {
        for (;;) {
          const job = await w.claim();
          if (!job) return;
          claims.push(job.request_id);
          await w.process(job, async () => ({ ok: true }));
        }
      }),
    );
    assert.equal(claims.length, submitted.length);
    // The order the store granted claims in (claimed_at is taken inside the serialized claim).
    const { rows } = await p.db.query<{ id: string }>(
      'SELECT id FROM queue_jobs WHERE model = $1 ORDER BY claimed_at',
      [model],
    );
    const expected = [...submitted].sort((a, b) => b.priority - a.priority || a.i - b.i).map((s) => s.id);
    assert.deepEqual(
      rows.map((r) => r.id),
      expected,
    );
  });

  test("a worker's report takes its next job (claim_next): in priority order, through fail too, null when none comes", async () => {
    const model = await deployment();
    const low = await submit(model, { n: 'low' }, { priority: 1 });
    const high = await submit(model, { n: 'high' }, { priority: 9 });
    const first = await post('claim', { model, worker_id: 'w', claim_timeout_seconds: 30 });
    assert.equal(first.body.request_id, high);

    const done = await post('complete', {
      model,
      request_id: high,
      claim_token: first.body.claim_token,
      outputs: { ok: 1 },
      claim_next: { worker_id: 'w', claim_timeout_seconds: 30 },
    });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.equal(done.body.status, 'done');
    assert.deepEqual(done.body.outputs, { ok: 1 });
    assert.equal(done.body.next_claim.request_id, low);
    assert.deepEqual(done.body.next_claim.payload, { n: 'low' });
    assert.equal((await status(model, low)).body.status, 'running');

    const failLow = () =>
      post('fail', {
        model,
        request_id: low,
        claim_token: done.body.next_claim.claim_token,
        error: 'no good',
        claim_next: { wait_seconds: 0 },
      });
    const failed = await failLow();
    assert.equal(failed.status, 200, JSON.stringify(failed.body));
    assert.equal(failed.body.status, 'failed');
    assert.equal(failed.body.next_claim, null, 'the queue is empty: no next claim');

    // A report whose claim is lost claims nothing; the same outcome reported again (its first
    // answer lost on the way) answers the job as it is, and takes the next job.
    const waiting = await submit(model, { n: 'waiting' });
    const lostReport = await post('complete', {
      model,
      request_id: high,
      claim_token: 'not-the-claim',
      claim_next: { wait_seconds: 0 },
    });
    assert.equal(lostReport.status, 409, JSON.stringify(lostReport.body));
    assert.equal(lostReport.body.error.code, 'claim_lost');
    assert.equal((await status(model, waiting)).body.status, 'pending', 'a lost report claims nothing');
    const again = await failLow();
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.status, 'failed');
    assert.equal(again.body.next_claim.request_id, waiting);
    const waitingDone = await post('complete', {
      model,
      request_id: waiting,
      claim_token: again.body.next_claim.claim_token,
    });
    assert.equal(waitingDone.body.status, 'done');
    // Without claim_next the answer is the job alone, as before.
    const plain = await submit(model, { n: 'plain' });
    const claimed = await post('claim', { model, claim_timeout_seconds: 30 });
    const alone = await post('complete', { model, request_id: plain, claim_token: claimed.body.claim_token });
    assert.equal(alone.body.status, 'done');
    assert.ok(!('next_claim' in alone.body));

    const bad = await post('complete', {
      model,
      request_id: plain,
      claim_token: claimed.body.claim_token,
      claim_next: { wait_seconds: 99 },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'claim_next.wait_seconds');
  });

  test('workers that run() take each next job with their report, still in strict priority order', async () => {
    const model = await deployment();
    const priorities = [3, 0, 9, 3, -1, 9, 0, 5, 5, 3, 0, 9];
    const submitted: Array<{ id: string; priority: number; i: number }> = [];
    for (const [i, priority] of priorities.entries()) {
      submitted.push({ id: await submit(model, { i }, { priority }), priority, i });
    }
    let handled = 0;
    const workers = Array.from(
      { length: 3 },
      (_, w) => new QueueWorker({ baseUrl: p.baseUrl, apiKey: t.key, model, workerId: `r${w}`, waitSeconds: 0.2 }),
    );
    await Promise.all(
      workers.map((w) =>
        w.run(async () => {
          if (++handled === submitted.length) workers.forEach((x) => x.stop());
          return { ok: true };
        }),
      ),
    );
    const { rows } = await p.db.query<{ id: string; status: string; history: Array<{ status: string }> }>(
      'SELECT id, status, history FROM queue_jobs WHERE model = $1 ORDER BY claimed_at',
      [model],
    );
    const expected = [...submitted].sort((a, b) => b.priority - a.priority || a.i - b.i).map((s) => s.id);
    assert.deepEqual(
      rows.map((r) => r.id),
      expected,
    );
    assert.ok(rows.every((r) => r.status === 'done' && r.history.filter((h) => h.status === 'running').length === 1));
  });

  test('a worker stopped while its report waits for the next job still processes the job that report brings', async () => {
    const name = `model-${newId('d').slice(2, 10)}`;
    const deploymentId = newId('dep');
    await insertDeployment(p.db, { id: deploymentId, projectId: t.projectId, name });
    const first = await submit(name, { n: 1 });
    const handled: string[] = [];
    const worker = new QueueWorker({ baseUrl: p.baseUrl, apiKey: t.key, model: name, workerId: 's', waitSeconds: 10 });
    const running = worker.run(async (job) => {
      handled.push(job.request_id);
      return {};
    });
    // The first job's report is waiting for a next one (a claim waits on the queue)...
    await eventually(
      async () => handled.length === 1 && p.queueWakeups.waiting(deploymentId) === 1,
      (ready) => ready,
      10_000,
    );
    // ...when the worker is told to stop, and a job arrives that the report then takes.
    worker.stop();
    const second = await submit(name, { n: 2 });
    await running;
    assert.deepEqual(handled, [first, second]);
    assert.equal((await status(name, second)).body.status, 'done', 'not left claimed to lapse');
  });

  test('a silent worker loses the claim: the job is retried, info accumulates, the 4th silence fails it', async () => {
    const model = await deployment();
    const id = await submit(model, { op: 'x' }, { info: { submitted_by: 'test' } });
    const first = await post('claim', { model, claim_timeout_seconds: 1 });
    assert.equal(first.body.request_id, id);
    const upd = await post('update', {
      model,
      request_id: id,
      claim_token: first.body.claim_token,
      info: { attempt_1: 'loaded' },
      progress: 0.3,
    });
    assert.equal(upd.status, 200);
    assert.deepEqual(upd.body.info, { submitted_by: 'test', attempt_1: 'loaded', progress: 0.3 });
    // Silence: after the claim timeout the job is pending again, its info intact.
    const back = await eventually(
      () => status(model, id),
      (r) => r.body.status === 'pending',
      15_000,
    );
    assert.equal(back.body.retries, 1);
    assert.deepEqual(back.body.info, { submitted_by: 'test', attempt_1: 'loaded', progress: 0.3 });
    const late = await post('update', { model, request_id: id, claim_token: first.body.claim_token, info: {} });
    assert.equal(late.status, 409, 'the old claim is gone');

    const second = await post('claim', { model, claim_timeout_seconds: 1 });
    assert.equal(second.body.retries, 1);
    assert.equal(second.body.info.attempt_1, 'loaded', 'the worker sees what earlier attempts reported');
    await post('update', {
      model,
      request_id: id,
      claim_token: second.body.claim_token,
      info: { attempt_2: 'ran' },
      progress: 1,
    });
    const done = await post('complete', {
      model,
      request_id: id,
      claim_token: second.body.claim_token,
      outputs: { y: 1 },
    });
    assert.equal(done.body.status, 'done');
    assert.deepEqual(done.body.info, { submitted_by: 'test', attempt_1: 'loaded', attempt_2: 'ran', progress: 1 });
    assert.deepEqual(
      done.body.history.map((h: any) => h.status),
      ['pending', 'running', 'pending', 'running', 'done'],
    );

    // Four silent claims in a row: three retries, then failed for good.
    const doomed = await submit(model, { op: 'x' });
    for (let attempt = 0; attempt < 4; attempt++) {
      const c = await eventually(
        () => post('claim', { model, claim_timeout_seconds: 1 }),
        (r) => r.status === 200,
        15_000,
      );
      assert.equal(c.body.request_id, doomed);
      assert.equal(c.body.retries, attempt);
    }
    const failed = await eventually(
      () => status(model, doomed),
      (r) => r.body.status === 'failed',
      15_000,
    );
    assert.equal(failed.body.retries, 3);
    assert.match(failed.body.error, /claim timeout/);
  });

  test('a job the worker fails is not retried', async () => {
    const model = await deployment();
    const id = await submit(model, { op: 'fail' });
    const w = new QueueWorker({ baseUrl: p.baseUrl, apiKey: t.key, model, waitSeconds: 0 });
    const job = (await w.claim())!;
    assert.equal(
      await w.process(job, async () => {
        throw new Error('bad input row 7');
      }),
      'failed',
    );
    const s = (await status(model, id)).body;
    assert.equal(s.status, 'failed');
    assert.equal(s.error, 'bad input row 7');
    assert.equal(s.retries, 0);
    // A job submitted after the failure is the next claim: the queue has moved past the failed
    // one, which it would have put back first had it meant to retry it.
    const after = await submit(model, { op: 'noop' });
    assert.equal((await post('claim', { model })).body.request_id, after, 'the next job, not the failed one');
    assert.equal((await post('claim', { model })).status, 204, 'nothing to claim again');
  });

  test('a worker process killed mid-job: another worker finishes it, with both attempts in info', async () => {
    const model = await deployment();
    // The job reports every second: a 3 s claim timeout leaves a healthy worker room, a dead one loses it soon.
    const env = { GANTRY_BASE_URL: p.baseUrl, GANTRY_API_KEY: t.key, QUEUE_MODEL: model, CLAIM_TIMEOUT_SECONDS: '3' };
    const id = await submit(model, { op: 'sleep', ms: 4000, steps: 4 }, { info: { user: 'u1' } });
    const a = startProcess('examples/queue-worker/worker.ts', { ...env, WORKER_ID: 'replica-a' });
    await eventually(
      () => status(model, id),
      (r) => r.body.info.step_1_by === 'replica-a',
      20_000,
    );
    a.child.kill('SIGKILL');
    await a.exited;
    const b = startProcess('examples/queue-worker/worker.ts', { ...env, WORKER_ID: 'replica-b' });
    try {
      const done = await eventually(
        () => status(model, id),
        (r) => r.body.status === 'done',
        30_000,
      );
      assert.equal(done.body.retries, 1);
      assert.equal(done.body.info.user, 'u1');
      assert.equal(done.body.info.step_1_by, 'replica-b', 'the retry ran every step again');
      assert.equal(done.body.info.progress, 1);
      assert.deepEqual(done.body.outputs, { slept_ms: 4000 });
      assert.deepEqual(
        done.body.history.map((h: any) => h.status),
        ['pending', 'running', 'pending', 'running', 'done'],
      );
      assert.deepEqual(
        done.body.history.filter((h: any) => h.status === 'running').map((h: any) => h.note),
        ['replica-a', 'replica-b'],
      );
    } finally {
      b.child.kill('SIGTERM');
      await b.exited;
    }
  });

  test("another project's key sees neither the model nor the jobs", async () => {
    const model = await deployment();
    const id = await submit(model, { op: 'echo' });
    const other = await createTenant(p.db);
    assert.equal((await status(model, id, other.key)).status, 404);
    assert.equal((await post('submit', { model, payload: {} }, other.key)).status, 404);
    assert.equal((await post('cancel', { model, request_id: id }, other.key)).status, 404);
    assert.equal((await post('claim', { model }, other.key)).status, 404);
    assert.equal((await status(model, id)).body.status, 'pending');
  });
});

describe('the queue dispatcher', () => {
  let q: TestPlatform;
  let u: Tenant;
  before(async () => {
    q = await startTestPlatform({ env: { GANTRY_QUEUE_RETENTION_SECONDS: '2' } });
    u = await createTenant(q.db);
  });
  after(() => q.stop());

  test("one workflow holds a queue's timers: claims start none of their own; finished jobs go after the retention period, then it ends", async () => {
    const model = `model-${newId('d').slice(2, 10)}`;
    const deploymentId = newId('dep');
    await insertDeployment(q.db, { id: deploymentId, projectId: u.projectId, name: model });
    const qpost = (path: string, json: unknown) => call(q.baseUrl, 'POST', `/v1/queue/${path}`, { key: u.key, json });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await qpost('submit', { model, payload: { i } })).body.request_id);
    for (let i = 0; i < 10; i++) {
      const c = await qpost('claim', { model, claim_timeout_seconds: 2 });
      assert.equal(c.status, 200);
      const done = await qpost('complete', { model, request_id: c.body.request_id, claim_token: c.body.claim_token });
      assert.equal(done.body.status, 'done');
    }
    // Temporal shows one run for the project's queue work: the queue's dispatcher.
    const runs = await eventually(
      async () => {
        const found: string[] = [];
        for await (const w of q.temporal.workflow.list({ query: `GantryProjectId = "${u.projectId}"` }))
          found.push(w.workflowId);
        return found;
      },
      (found) => found.length > 0,
    );
    assert.deepEqual(runs, [queueDispatcherWorkflowId(deploymentId)]);
    // The dispatcher looks at the first claim's deadline, finds the jobs finished, and deletes them
    // two seconds after they finished; with nothing left to watch it ends.
    for (const id of ids) {
      await eventually(
        () => call(q.baseUrl, 'GET', `/v1/queue/status?model=${model}&request_id=${id}`, { key: u.key }),
        (r) => r.status === 404,
        20_000,
      );
    }
    const handle = q.temporal.workflow.getHandle(queueDispatcherWorkflowId(deploymentId));
    assert.equal(await handle.result(), 'idle');
  });

  test('a dispatcher terminated while it holds a claim: the next claim starts a new one, and the silent claim still lapses', async () => {
    const model = `model-${newId('d').slice(2, 10)}`;
    const deploymentId = newId('dep');
    await insertDeployment(q.db, { id: deploymentId, projectId: u.projectId, name: model });
    const qpost = (path: string, json: unknown) => call(q.baseUrl, 'POST', `/v1/queue/${path}`, { key: u.key, json });
    const silent = (await qpost('submit', { model, payload: { n: 1 } })).body.request_id;
    const other = (await qpost('submit', { model, payload: { n: 2 } })).body.request_id;
    const first = await qpost('claim', { model, claim_timeout_seconds: 1 });
    assert.equal(first.body.request_id, silent);
    // An operator ends the dispatcher; its worker never reports on the claim.
    const handle = q.temporal.workflow.getHandle(queueDispatcherWorkflowId(deploymentId));
    await handle.terminate('operator test');
    // Once it is overdue (its claim's deadline plus 10 s), the next claim starts a new dispatcher...
    await new Promise((r) => setTimeout(r, 12_000));
    const second = await qpost('claim', { model, claim_timeout_seconds: 60 });
    assert.equal(second.body.request_id, other);
    // ...which looks at once and puts the silent claim's job back in the queue.
    const back = await eventually(
      () => call(q.baseUrl, 'GET', `/v1/queue/status?model=${model}&request_id=${silent}`, { key: u.key }),
      (r) => r.body.status === 'pending',
      15_000,
    );
    assert.equal(back.body.retries, 1);
    assert.equal((await handle.describe()).status.name, 'RUNNING', 'a new run');
  });
});
