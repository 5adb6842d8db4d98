/**
 * Claim long-polls wait on a notification, not on the table: many workers
 * waiting on an empty queue hold no database connection and make no queries,
 * and a job submitted while they wait goes to one of them at once, whichever
 * API process they wait in. A claim whose timer cannot be set gives its job back.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { newId } from '../../platform/ids';
import { insertDeployment } from '../../db/deployments';
import { call, eventually, startApiWithoutTemporal, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startApiProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ containers: false });
  t = await createTenant(p.db);
});
after(() => p.stop());

const post = (path: string, json: unknown) => call(p.baseUrl, 'POST', `/v1/queue/${path}`, { key: t.key, json });

test('30 waiting claims hold no connection of the 10-connection pool; a new job wakes one', async () => {
  const model = `model-${newId('d').slice(2, 10)}`;
  const deploymentId = newId('dep');
  await insertDeployment(p.db, { id: deploymentId, projectId: t.projectId, name: model });
  const claims = Array.from({ length: 30 }, () => post('claim', { model, claim_timeout_seconds: 30, wait_seconds: 8 }));
  // Every claim has looked once and is waiting on the queue's notification.
  await eventually(
    async () => p.queueWakeups.waiting(deploymentId),
    (n) => n === 30,
    5_000,
  );

  // What the waiting costs: connections taken from the pool (the API's and the workers' pool) over 1.5 s.
  let checkouts = 0;
  const count = () => checkouts++;
  p.db.on('acquire', count);
  await new Promise((r) => setTimeout(r, 1500));
  p.db.off('acquire', count);
  assert.ok(checkouts < 30, `${checkouts} connections taken while 30 claims waited (a 20 ms poll takes ~2,000)`);

  // Other requests are served meanwhile, and a job submitted now is claimed before the waits end.
  const submitted = await post('submit', { model, payload: { op: 'echo', value: 1 }, priority: 1 });
  assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
  const answers = await Promise.all(claims);
  const got = answers.filter((a) => a.status === 200);
  assert.equal(got.length, 1, 'exactly one waiting worker got the job');
  assert.equal(got[0].body.request_id, submitted.body.request_id);
  assert.equal(answers.filter((a) => a.status === 204).length, 29, 'the others found nothing when their wait ended');
});

test('a worker that leaves while its claim waits takes no job: the next job goes to a worker still there', async () => {
  const model = `model-${newId('d').slice(2, 10)}`;
  const deploymentId = newId('dep');
  await insertDeployment(p.db, { id: deploymentId, projectId: t.projectId, name: model });
  const leaving = new AbortController();
  const left = fetch(`${p.baseUrl}/v1/queue/claim`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model, worker_id: 'leaving', claim_timeout_seconds: 30, wait_seconds: 20 }),
    signal: leaving.signal,
  }).catch((err: Error) => err.name);
  await eventually(
    async () => p.queueWakeups.waiting(deploymentId),
    (n) => n === 1,
    5_000,
  );
  leaving.abort();
  assert.equal(await left, 'AbortError');
  // The API saw the worker go: its wait is over well before its 20 s.
  await eventually(
    async () => p.queueWakeups.waiting(deploymentId),
    (n) => n === 0,
    5_000,
  );

  const submitted = await post('submit', { model, payload: { n: 1 } });
  const claimed = await post('claim', { model, worker_id: 'staying', claim_timeout_seconds: 30, wait_seconds: 5 });
  assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
  assert.equal(claimed.body.request_id, submitted.body.request_id);
  const job = await call(p.baseUrl, 'GET', `/v1/queue/status?model=${model}&request_id=${submitted.body.request_id}`, {
    key: t.key,
  });
  assert.deepEqual(
    job.body.history.map((h: { status: string; note?: string }) => [h.status, h.note ?? null]),
    [
      ['pending', null],
      ['running', 'staying'],
    ],
    'claimed once, by the worker still there',
  );
});

test('a claim waiting in another API process gets a job submitted through this one at once', async () => {
  const model = `model-${newId('d').slice(2, 10)}`;
  await insertDeployment(p.db, { id: newId('dep'), projectId: t.projectId, name: model });
  const { api: other, url: otherUrl } = await startApiProcess();
  try {
    // The longest wait a claim may ask for: it answers before that only when something woke it.
    const claim = call(otherUrl, 'POST', '/v1/queue/claim', {
      key: t.key,
      json: { model, claim_timeout_seconds: 30, wait_seconds: 20 },
    });
    // Time for the claim to look once and start waiting (a claim that had not would find the job
    // on its first look, and this test would not tell).
    await new Promise((r) => setTimeout(r, 1000));
    const submittedAt = Date.now();
    const submitted = await post('submit', { model, payload: { op: 'echo' }, priority: 0 });
    assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
    const claimed = await claim;
    const tookMs = Date.now() - submittedAt;
    assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
    assert.equal(claimed.body.request_id, submitted.body.request_id);
    assert.ok(tookMs < 10_000, `the waiting claim answered ${tookMs} ms after the submit (its wait was 20 s)`);
  } finally {
    other.child.kill('SIGTERM');
    await other.exited;
  }
});

test('a burst of submits sends other API processes one notification every few milliseconds, none of its jobs left out', async () => {
  const deploymentId = newId('dep');
  await insertDeployment(p.db, { id: deploymentId, projectId: t.projectId, name: `model-${newId('d').slice(2, 10)}` });
  // What another API process hears: the queue channel, on a connection of its own.
  const listener = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await listener.connect();
  const heard: number[] = [];
  listener.on('notification', (n) => {
    if (n.channel === 'gantry_queue' && n.payload?.startsWith(`${deploymentId}\n`)) heard.push(performance.now());
  });
  await listener.query('LISTEN gantry_queue');
  const quiet = () =>
    eventually(
      async () => heard.length,
      (n) => n > 0 && performance.now() - heard.at(-1)! > 500,
    );
  try {
    // Fifty jobs committed in one moment: one notification now, and one more for the jobs that came
    // while it was on its way (announcing them all, however late the first was).
    for (let i = 0; i < 50; i++) p.queueWakeups.jobPending(p.db, deploymentId);
    await quiet();
    assert.equal(heard.length, 2, 'one notification, then one for the jobs that came while it was on its way');

    // Jobs every millisecond or so for 200 ms: notifications at least 5 ms apart, not one per job.
    heard.length = 0;
    const first = performance.now();
    let jobs = 0;
    while (performance.now() - first < 200) {
      p.queueWakeups.jobPending(p.db, deploymentId);
      jobs++;
      await sleep(1);
    }
    const last = performance.now();
    await quiet();
    assert.ok(heard.length >= 2, `${heard.length} notifications for ${jobs} jobs`);
    assert.ok(
      heard.length <= (last - first) / 5 + 2,
      `${heard.length} notifications for ${jobs} jobs in ${Math.round(last - first)} ms`,
    );
  } finally {
    await listener.end();
  }
});

test('a claim whose queue dispatcher cannot be woken fails, and its job goes back to the queue unharmed', async () => {
  const model = `model-${newId('d').slice(2, 10)}`;
  await insertDeployment(p.db, { id: newId('dep'), projectId: t.projectId, name: model });
  const submitted = await post('submit', { model, payload: { op: 'echo' }, priority: 0 });
  // The platform's API with Temporal unreachable: the dispatcher can be neither woken nor started.
  const broken = await startApiWithoutTemporal(p);
  try {
    const refused = await call(broken.baseUrl, 'POST', '/v1/queue/claim', { key: t.key, json: { model } });
    assert.ok(refused.status >= 500, `${refused.status} ${JSON.stringify(refused.body)}`);
  } finally {
    broken.close();
  }
  const job = await call(p.baseUrl, 'GET', `/v1/queue/status?model=${model}&request_id=${submitted.body.request_id}`, {
    key: t.key,
  });
  assert.equal(job.body.status, 'pending');
  assert.equal(job.body.retries, 0, 'a claim no worker saw is not a retry');
  assert.match(job.body.history.at(-1).note, /dispatcher could not be reached/);
  // The working API's next claim takes it, and its dispatcher watches it.
  const claimed = await post('claim', { model, claim_timeout_seconds: 30 });
  assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
  assert.equal(claimed.body.request_id, submitted.body.request_id);
});
