/**
 * Operations: Prometheus metrics of the API (requests, latency and errors by
 * route pattern) on their own port, the workers' Temporal SDK metrics on
 * theirs, and the per-key rate limit (429 with Retry-After).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createApp } from '../../api/app';
import { createHttpMetrics, serveMetrics } from '../../api/metrics';
import { createLogger } from '../../platform/logger';
import { freePort } from '../../platform/ports';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
const processes: StartedProcess[] = [];

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_RATE_LIMIT_PER_SECOND: '1', GANTRY_RATE_LIMIT_BURST: '3' } });
  t = await createTenant(p.db);
});
after(async () => {
  for (const w of processes) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  await p.stop();
});

describe('operations', () => {
  test('a key over its rate limit gets 429 with Retry-After; another key does not', async () => {
    const statuses: number[] = [];
    let limited: { status: number; body: any; headers: Headers } | undefined;
    for (let i = 0; i < 5; i++) {
      const res = await call(p.baseUrl, 'GET', '/v1/whoami', { key: t.key });
      statuses.push(res.status);
      if (res.status === 429) limited ??= res;
    }
    assert.deepEqual(statuses.slice(0, 3), [200, 200, 200], 'the burst passes');
    assert.ok(limited, `a request past the burst is refused: ${statuses}`);
    assert.equal(limited.body.error.code, 'rate_limit_exceeded');
    const retryAfter = Number(limited.headers.get('retry-after'));
    assert.ok(retryAfter >= 1, `Retry-After ${retryAfter}`);
    const other = await createTenant(p.db);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: other.key })).status, 200);
    await new Promise((r) => setTimeout(r, retryAfter * 1000));
    assert.equal(
      (await call(p.baseUrl, 'GET', '/v1/whoami', { key: t.key })).status,
      200,
      'allowed again after Retry-After',
    );
  });

  test('API metrics: requests, errors and latency by route pattern, on their own port', async () => {
    const metrics = createHttpMetrics('api');
    const app = createApp({
      config: { ...p.config, rateLimitPerSecond: 0 },
      db: p.db,
      temporal: p.temporal,
      logger: createLogger('api', 'silent'),
      blobs: p.blobs,
      metrics,
    });
    const server = createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const api = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const scrape = await serveMetrics(metrics.registry, 0, '127.0.0.1');
    try {
      assert.equal((await call(api, 'GET', '/v1/fine-tunes/ft-nope', { key: t.key })).status, 404);
      assert.equal((await call(api, 'GET', '/v1/fine-tunes/ft-other', { key: t.key })).status, 404);
      assert.equal((await call(api, 'GET', '/v1/whoami', { key: t.key })).status, 200);
      const text = await fetch(`http://127.0.0.1:${(scrape.address() as AddressInfo).port}/metrics`).then((r) =>
        r.text(),
      );
      assert.match(
        text,
        /gantry_http_requests_total\{method="GET",route="\/v1\/fine-tunes\/:id",status="404",service="api"\} 2/,
      );
      assert.match(
        text,
        /gantry_http_request_errors_total\{method="GET",route="\/v1\/fine-tunes\/:id",class="4xx",service="api"\} 2/,
      );
      assert.match(
        text,
        /gantry_http_requests_total\{method="GET",route="\/v1\/whoami",status="200",service="api"\} 1/,
      );
      assert.match(
        text,
        /gantry_http_request_duration_seconds_count\{service="api",method="GET",route="\/v1\/whoami"\} 1/,
      );
      assert.doesNotMatch(text, /ft-nope/, 'ids never become labels');
      assert.match(text, /process_cpu_seconds_total/);
    } finally {
      server.close();
      scrape.close();
    }
  });

  test("a worker serves the Temporal SDK's metrics on its metrics port", async () => {
    const port = await freePort();
    const worker = startProcess('workers/gpu.ts', {
      GANTRY_GPU_TYPES: 'H100_SXM',
      GANTRY_ACCELERATOR: 'simulated',
      GANTRY_METRICS_PORT: String(port),
    });
    processes.push(worker);
    await worker.waitFor(/SIMULATED accelerator host/);
    const text = await eventually(
      () =>
        fetch(`http://127.0.0.1:${port}/metrics`).then(
          (r) => r.text(),
          () => '',
        ),
      (body) => /temporal_/.test(body),
      30_000,
    );
    assert.match(text, /temporal_\w+\{[^}]*task_queue="gpu.H100_SXM"/);
  });
});
