/**
 * Attack: freeze the API for every tenant with one list request. The v2 list `filter` takes `*`
 * wildcards in a name; a matcher that backtracks (a RegExp of `.*`s) spends time exponential in
 * the wildcards on a long name, on the event loop, so the API answers nobody until it is done.
 *
 * The attacker here is an ordinary project key against the real API process (api/server.ts, a
 * child process, so that its event loop is not the test's and the test's own timers still run):
 * one endpoint named with 63 `a`s and a filter of many wildcards that can never match. While that
 * request is in flight, `/healthz` is asked again and again; each must be answered. Every wait is
 * bounded, so on a matcher that backtracks the test fails (a health check unanswered) instead of
 * hanging, and the API process is killed at the end either way.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createPool } from '../../db/pool';
import { call } from '../helpers/platform';
import { startApiProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

/** Generous on a loaded two-core machine; a linear matcher answers in milliseconds. */
const ANSWER_WITHIN_MS = 10_000;

let api: StartedProcess;
let baseUrl: string;
let t: Tenant;

before(async () => {
  ({ api, url: baseUrl } = await startApiProcess());
  const db = createPool(process.env.DATABASE_URL!, 1);
  t = await createTenant(db);
  await db.end();
  const created = await call(baseUrl, 'POST', `/v2/projects/${t.projectId}/endpoints`, {
    key: t.key,
    json: { name: 'a'.repeat(63) },
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
});
after(() => {
  if (api.child.exitCode === null) api.child.kill('SIGKILL');
});

/** A GET that gives up after `ms`: what it answered and when, or why it did not. */
async function timedGet(path: string, ms: number, key?: string) {
  const started = Date.now();
  try {
    const res = await fetch(baseUrl + path, {
      headers: key ? { authorization: `Bearer ${key}` } : {},
      signal: AbortSignal.timeout(ms),
    });
    return { status: res.status, body: (await res.json()) as any, ms: Date.now() - started };
  } catch (err) {
    return { error: String(err), ms: Date.now() - started };
  }
}

test('a filter of many wildcards on a long name does not stop the API answering others', async () => {
  // 20 wildcards, and a `b` the name does not hold: a backtracking matcher tries every way of
  // spreading 63 `a`s over 20 `.*`s before it gives up.
  const filter = `name="${'*a'.repeat(20)}*b"`;
  const attack = timedGet(
    `/v2/projects/${t.projectId}/endpoints?${new URLSearchParams({ filter })}`,
    ANSWER_WITHIN_MS,
    t.key,
  );
  let attackSettled = false;
  void attack.finally(() => (attackSettled = true));

  // While the attack is in flight (and at least once), someone else's request is answered.
  const healthChecks = [];
  do {
    const health = await timedGet('/healthz', ANSWER_WITHIN_MS);
    healthChecks.push(health);
    assert.equal(health.status, 200, `a health check while the attack was in flight: ${JSON.stringify(health)}`);
  } while (!attackSettled);

  const answered = await attack;
  assert.equal(answered.status, 200, JSON.stringify(answered));
  assert.deepEqual(answered.body.data, [], 'nothing ends in b');
  const slowestHealth = Math.max(...healthChecks.map((h) => h.ms));
  assert.ok(slowestHealth < ANSWER_WITHIN_MS, `health answered in ${slowestHealth} ms`);
});

test('the wildcard filter still finds what it names', async () => {
  const res = await timedGet(
    `/v2/projects/${t.projectId}/endpoints?${new URLSearchParams({ filter: `name="${'*a'.repeat(20)}*"` })}`,
    ANSWER_WITHIN_MS,
    t.key,
  );
  assert.equal(res.status, 200, JSON.stringify(res));
  assert.deepEqual(
    res.body.data.map((e: { name: string }) => e.name),
    ['a'.repeat(63)],
  );
});
