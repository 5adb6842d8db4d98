/**
 * Container deployments on the `process` runtime, through the API: replicas
 * become Ready only once healthy, secrets reach the replica but never a
 * response or a log line, a replica that dies is replaced (replica_events say
 * so), a spec change rolls the replicas, scale-down honours the grace period,
 * delete stops everything.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { deployHttpReplica } from '../helpers/deployments';

const SERVER = path.resolve(__dirname, '../../examples/http-replica/server.mjs');
let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v1${url}`, { key, json });
const get = (name: string) => api('GET', `/deployments/${name}`).then((r) => r.body);
const ports = async (id: string) =>
  (
    await p.db.query<{ replica_id: string; port: number }>(
      `SELECT replica_id, port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running' ORDER BY replica_id`,
      [id],
    )
  ).rows;

function body(name: string, extra: Record<string, unknown> = {}) {
  return {
    name,
    image: 'example/http-replica:1',
    gpu_type: 'h100-80gb',
    command: [process.execPath, SERVER],
    health_check_path: '/health',
    min_replicas: 2,
    termination_grace_period_seconds: 5,
    environment_variables: [{ name: 'GREETING', value: 'hello' }],
    ...extra,
  };
}

describe('container deployments (process runtime)', () => {
  test('deploy: replicas ready after their health check; secrets reach them and nothing else', async () => {
    const secretValue = `s3cr3t-${Date.now()}`;
    const sec = await api('POST', '/deployments/secrets', {
      name: 'api-token',
      value: secretValue,
      description: 'for tests',
    });
    assert.equal(sec.status, 200);
    assert.equal(sec.body.value, undefined);
    assert.doesNotMatch(JSON.stringify((await api('GET', '/deployments/secrets')).body), new RegExp(secretValue));
    // Renaming a secret to a name another one has is a 409 (it was a 500 from the unique constraint).
    const second = await api('POST', '/deployments/secrets', { name: 'other-token', value: 'x' });
    const clash = await api('PATCH', `/deployments/secrets/${second.body.id}`, { name: 'api-token' });
    assert.equal(clash.status, 409, JSON.stringify(clash.body));
    assert.equal(clash.body.error.code, 'secret_exists');

    const created = await api(
      'POST',
      '/deployments',
      body('web', {
        environment_variables: [
          { name: 'GREETING', value: 'hello' },
          { name: 'API_TOKEN', value_from_secret: 'api-token' },
        ],
      }),
    );
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal(created.body.object, 'deployment');
    const ready = await eventually(
      () => get('web'),
      (d) => d.status === 'Ready',
      30_000,
    );
    assert.equal(ready.ready_replicas, 2);
    assert.equal(ready.desired_replicas, 2);
    const events = Object.values(ready.replica_events) as any[];
    assert.equal(events.length, 2);
    for (const e of events) {
      assert.equal(e.replica_status, 'Running');
      assert.ok(e.replica_ready_since);
    }
    const [r0] = await ports(ready.id);
    assert.equal(await (await fetch(`http://127.0.0.1:${r0.port}/env?name=API_TOKEN`)).text(), secretValue);
    assert.equal(await (await fetch(`http://127.0.0.1:${r0.port}/env?name=GREETING`)).text(), 'hello');
    assert.doesNotMatch(
      JSON.stringify(ready),
      new RegExp(secretValue),
      'the deployment object names the secret, not its value',
    );
    const logs = await api('GET', `/deployments/web/logs?replica_id=${r0.replica_id}`);
    assert.ok(
      logs.body.lines.some((l: string) => l.includes(`listening on ${r0.port}`)),
      JSON.stringify(logs.body),
    );
    assert.doesNotMatch(p.logs.text(), new RegExp(secretValue), 'no secret in the API logs');
  });

  test("the gateway passes path, query and headers on as sent, without the caller's key", async () => {
    const via = (url: string, init: RequestInit = {}) =>
      fetch(`${p.gatewayUrl}/v1/deployments/web${url}`, {
        ...init,
        headers: { authorization: `Bearer ${t.key}`, ...init.headers },
      });
    const echoed = await via('/headers?probe=1', { headers: { 'x-tenant-header': 'kept' } });
    assert.equal(echoed.status, 200);
    assert.match(echoed.headers.get('x-request-id') ?? '', /\S/, 'the gateway names the request');
    const headers = (await echoed.json()) as Record<string, string | undefined>;
    assert.equal(headers['x-tenant-header'], 'kept');
    assert.equal(headers.authorization, undefined, "the caller's Gantry key never reaches the replica");
    assert.equal(headers['x-forwarded-for'], '127.0.0.1');
    assert.equal(await (await via('/env?name=GREETING')).text(), 'hello', 'the query string arrives');
    // A body streams through to the replica (POST /log prints the query's text and answers).
    const posted = await via('/log?text=through%20the%20gateway', { method: 'POST', body: 'x'.repeat(100_000) });
    assert.equal(await posted.text(), 'logged');
    await eventually(
      async () => (await api('GET', '/deployments/web/logs')).body.lines as string[],
      (lines) => lines.some((l) => l.includes('through the gateway')),
      10_000,
    );

    const elsewhere = await call(p.gatewayUrl, 'GET', '/v1/files', { key: t.key });
    assert.equal(elsewhere.status, 404);
    assert.equal(elsewhere.body.error.code, 'route_not_found');
    const keyless = await call(p.gatewayUrl, 'GET', '/v1/deployments/web/health', {});
    assert.equal(keyless.status, 401);
    const big = await fetch(`${p.gatewayUrl}/v1/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: `${t.projectSlug}/none`, prompt: 'x'.repeat(5 * 1024 * 1024) }),
    });
    assert.equal(big.status, 413);
    // A trailing slash reaches the same route (here: its 404 for an endpoint that does not exist).
    const slashed = await call(p.gatewayUrl, 'POST', '/v1/completions/', {
      key: t.key,
      json: { model: `${t.projectSlug}/none`, prompt: 'x' },
    });
    assert.equal(slashed.body.error.code, 'model_not_found');
    const zipped = await fetch(`${p.gatewayUrl}/v1/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-encoding': 'gzip' },
      body: 'not really gzip',
    });
    assert.equal(zipped.status, 400);
    assert.equal(((await zipped.json()) as { error: { code: string } }).error.code, 'unsupported_encoding');
  });

  test("a caller that leaves ends the gateway's request to the replica", async () => {
    const caller = new AbortController();
    const answer = fetch(`${p.gatewayUrl}/v1/deployments/web/slow?ms=8000&tag=left-early`, {
      headers: { authorization: `Bearer ${t.key}` },
      signal: caller.signal,
    });
    const logged = (text: string) =>
      eventually(
        async () => (await api('GET', '/deployments/web/logs')).body.lines as string[],
        (ls) => ls.some((l) => l.includes(text)),
        5_000,
      );
    // Once the replica holds the request, the caller goes; the replica would answer 8 s later.
    await logged('slow request started (left-early)');
    caller.abort();
    await assert.rejects(answer, { name: 'AbortError' });
    await logged('slow request abandoned (left-early)');
  });

  test('a replica that dies is replaced and replica_events record it; the gateway steps around it', async () => {
    const d = await get('web');
    const [victim] = await ports(d.id);
    const viaGateway = () => call(p.gatewayUrl, 'GET', '/v1/deployments/web/', { key: t.key });
    for (let i = 0; i < 2; i++) assert.equal((await viaGateway()).status, 200); // the gateway now knows both replicas
    await fetch(`http://127.0.0.1:${victim.port}/crash`, { method: 'POST' });
    await eventually(
      () =>
        fetch(`http://127.0.0.1:${victim.port}/health`).then(
          () => 'up',
          () => 'gone',
        ),
      (s) => s === 'gone',
      5_000,
    );
    // Requests right after the crash reach the live replica, though the dead one may still be listed.
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await viaGateway()).status);
    assert.deepEqual(statuses, [200, 200, 200, 200]);
    const healed = await eventually(
      () => get('web'),
      // The replica's own record says Exited before the workflow reacts: wait for the replacement too.
      (x) =>
        x.replica_events[victim.replica_id]?.replica_status === 'Exited' &&
        x.ready_replicas === 2 &&
        x.status === 'Ready',
      30_000,
    );
    assert.equal(healed.replica_events[victim.replica_id].replica_status_reason, 'ProcessExited');
    assert.match(healed.replica_events[victim.replica_id].replica_status_message, /code 3/);
    assert.equal(healed.ready_replicas, 2);
    assert.equal(Object.keys(healed.replica_events).length, 3, 'a new replica took its place');
  });

  test('a spec change rolls every replica to the new revision; scale-down gives the grace period', async () => {
    const res = await api('PATCH', '/deployments/web', {
      environment_variables: [
        { name: 'GREETING', value: 'bonjour' },
        { name: 'DRAIN_MS', value: '800' },
      ],
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const rolled = await eventually(
      () => get('web'),
      (x) =>
        x.status === 'Ready' &&
        (Object.values(x.replica_events) as any[])
          .filter((e) => e.replica_status === 'Running')
          .every((e) => e.revision_id === '2'),
      60_000,
    );
    const running = await ports(rolled.id);
    assert.equal(running.length, 2, JSON.stringify({ running, events: rolled.replica_events }));
    for (const r of running)
      assert.equal(await (await fetch(`http://127.0.0.1:${r.port}/env?name=GREETING`)).text(), 'bonjour');

    await api('PATCH', '/deployments/web', { min_replicas: 1 });
    const down = await eventually(
      () => get('web'),
      (x) => x.ready_replicas === 1 && x.status === 'Ready',
      30_000,
    );
    const stopped = (Object.entries(down.replica_events) as Array<[string, any]>).filter(
      ([, e]) => e.replica_status === 'Terminated' && e.revision_id === '2',
    );
    assert.equal(stopped.length, 1);
    assert.match(stopped[0][1].replica_status_message, /grace 5s/);
    const drainLog = await api('GET', `/deployments/web/logs?replica_id=${stopped[0][0]}`);
    assert.ok(drainLog.body.lines.some((l: string) => l.includes('SIGTERM received, draining')));
  });

  test('bad input is refused with the field named; another project sees nothing', async () => {
    const noImage = await api('POST', '/deployments', { ...body('x1'), image: undefined });
    assert.equal(noImage.status, 400);
    assert.equal(noImage.body.error.param, 'image');
    const both = await api(
      'POST',
      '/deployments',
      body('x2', { environment_variables: [{ name: 'A', value: '1', value_from_secret: 'api-token' }] }),
    );
    assert.equal(both.status, 400);
    const missing = await api(
      'POST',
      '/deployments',
      body('x3', { environment_variables: [{ name: 'A', value_from_secret: 'nope' }] }),
    );
    assert.equal(missing.body.error.param, 'environment_variables[0].value_from_secret');
    const dup = await api('POST', '/deployments', body('web'));
    assert.equal(dup.status, 409);
    const other = await createTenant(p.db);
    assert.equal((await api('GET', '/deployments/web', undefined, other.key)).status, 404);
    assert.equal((await api('GET', '/deployments/secrets/api-token', undefined, other.key)).status, 404);
    assert.deepEqual((await api('GET', '/deployments', undefined, other.key)).body.data, []);
  });

  test('logs follow: new lines stream as replicas write them; delete stops every replica and ends the stream', async () => {
    const d = await get('web');
    const before = await ports(d.id);
    const stream = await fetch(`${p.baseUrl}/v1/deployments/web/logs?follow=true`, {
      headers: { authorization: `Bearer ${t.key}` },
    });
    assert.equal(stream.status, 200);
    assert.match(stream.headers.get('content-type') ?? '', /application\/x-ndjson/);
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let received = '';
    const readUntil = async (needle: string) => {
      while (!received.includes(needle)) {
        const { value, done } = await reader.read();
        if (done) return false;
        received += value;
      }
      return true;
    };
    assert.ok(await readUntil('listening on'), 'the tail comes first');
    const marker = `marker-${Date.now()}`;
    await fetch(`http://127.0.0.1:${before[0].port}/log?text=${marker}`, { method: 'POST' });
    assert.ok(await readUntil(marker), 'a line written after the stream opened arrives');
    const entry = received
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
      .find((e) => e.line.includes(marker));
    assert.equal(entry.replica_id, before[0].replica_id);

    const del = await api('DELETE', '/deployments/web');
    assert.equal(del.status, 200);
    await eventually(
      () => api('GET', '/deployments/web'),
      (r) => r.status === 404,
      30_000,
    );
    assert.equal(await readUntil('never-written'), false, 'the stream ends once the deployment is gone');
    for (const r of before) {
      await assert.rejects(fetch(`http://127.0.0.1:${r.port}/health`), 'the replica process is gone');
    }
  });

  test('deployments of two projects may share a name, and deleting one leaves the other', async () => {
    // This host runs one project's replicas (the process runtime is single-tenant), so the other
    // project's deployment is kept but not run here: replicas of two projects running apart are the
    // podman runtime's (podman-isolation.test.ts), the refusal is test/security/process-runtime-single-tenant.test.ts.
    const other = await createTenant(p.db);
    const mine = await deployHttpReplica(p, t.key, 'same-name');
    const theirs = await call(p.baseUrl, 'POST', '/v1/deployments', {
      key: other.key,
      json: { name: 'same-name', image: 'example/http-replica:1', gpu_type: 'h100-80gb', command: ['true'] },
    });
    assert.equal(theirs.status, 200, JSON.stringify(theirs.body));
    assert.notEqual(theirs.body.id, mine.id);

    assert.equal((await call(p.baseUrl, 'DELETE', '/v1/deployments/same-name', { key: t.key })).status, 200);
    await eventually(
      () => call(p.baseUrl, 'GET', '/v1/deployments/same-name', { key: t.key }),
      (r) => r.status === 404,
      30_000,
    );
    const still = await call(p.baseUrl, 'GET', '/v1/deployments/same-name', { key: other.key });
    assert.equal(still.status, 200);
    assert.equal(still.body.id, theirs.body.id);
    await call(p.baseUrl, 'DELETE', '/v1/deployments/same-name', { key: other.key });
  });
});
