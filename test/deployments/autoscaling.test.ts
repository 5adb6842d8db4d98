/**
 * Deployment autoscaling between min and max replicas: on a custom
 * Prometheus metric the replicas expose on /metrics, and on the backlog of
 * the deployment's queue (which also scales up from zero).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const SERVER = path.resolve(__dirname, '../../examples/http-replica/server.mjs');
let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({
    env: { GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1', GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '1' },
  });
  t = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown) => call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });
const get = (name: string) => api('GET', `/deployments/${name}`).then((r) => r.body);
const running = async (id: string) =>
  (
    await p.db.query<{ port: number }>(
      `SELECT port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
      [id],
    )
  ).rows;
const deploy = (name: string, extra: Record<string, unknown>) =>
  api('POST', '/deployments', {
    name,
    image: 'example/http-replica:1',
    gpu_type: 'h100-80gb',
    command: [process.execPath, SERVER],
    health_check_path: '/health',
    termination_grace_period_seconds: 2,
    ...extra,
  });

describe('deployment autoscaling', () => {
  test('on a custom metric: up with demand, down to min_replicas when idle, and to zero', async () => {
    const res = await deploy('metric-scaled', {
      min_replicas: 1,
      max_replicas: 3,
      autoscaling: {
        metric: 'CustomMetric',
        custom_metric_name: 'inflight_requests',
        target: 2,
        time_interval_minutes: 0,
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const one = await eventually(
      () => get('metric-scaled'),
      (d) => d.status === 'Ready',
      30_000,
    );
    const [r] = await running(one.id);
    await fetch(`http://127.0.0.1:${r.port}/set-metric?value=5`, { method: 'POST' });
    const up = await eventually(
      () => get('metric-scaled'),
      (d) => d.ready_replicas === 3 && d.status === 'Ready',
      30_000,
    );
    assert.equal(up.desired_replicas, 3, 'ceil(5 / 2) = 3, within max_replicas');
    for (const x of await running(up.id))
      await fetch(`http://127.0.0.1:${x.port}/set-metric?value=0`, { method: 'POST' });
    const idle = await eventually(
      () => get('metric-scaled'),
      (d) => d.ready_replicas === 1 && d.status === 'Ready',
      30_000,
    );
    assert.equal(idle.desired_replicas, 1, 'idle: back to min_replicas');
    await api('PATCH', '/deployments/metric-scaled', { min_replicas: 0 });
    const zero = await eventually(
      () => get('metric-scaled'),
      (d) => d.status === 'ScaledToZero',
      30_000,
    );
    assert.equal(zero.ready_replicas, 0);
    await api('DELETE', '/deployments/metric-scaled');
  });

  test('on queue backlog: scales up from zero when jobs wait, back to zero when the queue is empty', async () => {
    const res = await deploy('queue-scaled', {
      min_replicas: 0,
      max_replicas: 2,
      autoscaling: { metric: 'QueueBacklogPerWorker', target: 2, time_interval_minutes: 0 },
    });
    assert.equal(res.status, 200);
    await eventually(
      () => get('queue-scaled'),
      (d) => d.status === 'ScaledToZero',
      30_000,
    );
    for (let i = 0; i < 3; i++) await api('POST', '/queue/submit', { model: 'queue-scaled', payload: { i } });
    const up = await eventually(
      () => get('queue-scaled'),
      (d) => d.ready_replicas === 2 && d.status === 'Ready',
      30_000,
    );
    assert.equal(up.desired_replicas, 2, 'ceil(3 / 2) = 2');
    assert.equal((await api('POST', '/queue/clear', { model: 'queue-scaled' })).body.canceled_count, 3);
    await eventually(
      () => get('queue-scaled'),
      (d) => d.status === 'ScaledToZero',
      30_000,
    );
    await api('DELETE', '/deployments/queue-scaled');
  });

  test('on requests through the gateway: a request wakes a deployment scaled to zero, more requests add replicas', async () => {
    const res = await deploy('http-scaled', {
      min_replicas: 0,
      max_replicas: 3,
      autoscaling: { metric: 'HTTPTotalRequests', target: 5, time_interval_minutes: 1 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually(
      () => get('http-scaled'),
      (d) => d.status === 'ScaledToZero',
      30_000,
    );
    const gw = (suffix: string) =>
      fetch(`${p.gatewayUrl}/v1/deployments/http-scaled${suffix}`, { headers: { authorization: `Bearer ${t.key}` } });
    const cold = await gw('/');
    assert.equal(cold.status, 503, 'no replica yet');
    assert.ok(cold.headers.get('retry-after'));
    await eventually(
      () => get('http-scaled'),
      (d) => d.ready_replicas === 1 && d.status === 'Ready',
      30_000,
    );
    const headers = (await (await gw('/headers')).json()) as Record<string, string>;
    assert.equal(headers.authorization, undefined, "the caller's Gantry key is not forwarded");
    const seen = new Set<string>();
    for (let i = 0; i < 12; i++) {
      const r = await gw('/');
      assert.equal(r.status, 200);
      seen.add(((await r.json()) as { replica: string }).replica);
    }
    const up = await eventually(
      () => get('http-scaled'),
      (d) => d.ready_replicas === 3 && d.status === 'Ready',
      30_000,
    );
    assert.equal(up.desired_replicas, 3, '14 requests in the window, 5 per replica, capped at max_replicas');
    for (let i = 0; i < 6; i++) seen.add(((await (await gw('/')).json()) as { replica: string }).replica);
    assert.equal(seen.size, 3, 'requests are spread over the replicas');
    assert.equal((await fetch(`${p.gatewayUrl}/v1/deployments/http-scaled/`)).status, 401, 'the gateway authenticates');
    await api('DELETE', '/deployments/http-scaled');
  });

  test('on request durations through the gateway: a mean three times the target asks for three replicas', async () => {
    const res = await deploy('duration-scaled', {
      min_replicas: 1,
      max_replicas: 3,
      autoscaling: { metric: 'HTTPAvgRequestDuration', target: 100, time_interval_minutes: 1 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually(
      () => get('duration-scaled'),
      (d) => d.ready_replicas === 1 && d.status === 'Ready',
      30_000,
    );
    // Answers that take 300 ms, one at a time: the mean, not the count, asks for more replicas.
    const slow = () =>
      fetch(`${p.gatewayUrl}/v1/deployments/duration-scaled/slow?ms=300`, {
        headers: { authorization: `Bearer ${t.key}` },
      });
    let scaled = false;
    const load = (async () => {
      while (!scaled) assert.equal((await slow()).status, 200);
    })();
    const up = await eventually(
      () => get('duration-scaled'),
      (d) => d.ready_replicas === 3 && d.status === 'Ready',
      30_000,
    );
    scaled = true;
    await load;
    assert.equal(up.desired_replicas, 3, 'ceil(1 x 300 ms / 100 ms)');
    await api('DELETE', '/deployments/duration-scaled');
  });
});
