/**
 * A tenant's replica answers the container host's own requests (its health check, the
 * CustomMetric scrape of /metrics) with a redirect to somewhere on the host's network: the host
 * must not follow it. The "somewhere" is a listener this test runs on the host's loopback, counting
 * the requests it gets; each check first sees the replica log that it answered the host's request
 * with the redirect (examples/http-replica: GET /redirect?to=…, METRICS_REDIRECT), and only then
 * that the listener was never asked. And a health path that names another origin is refused at
 * the API. (The process runtime runs the replica: the host's requests are the same for every
 * runtime, providers/containers/replica-health.ts and activities/deployments.ts.)
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { HTTP_REPLICA } from '../helpers/deployments';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let attacker: Tenant;
/** The host-side service the replica points the host at: it answers as a healthy replica would. */
let listener: Server;
let listenerUrl: string;
let listenerHits = 0;

before(async () => {
  p = await startTestPlatform({
    env: { GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1', GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '1' },
  });
  attacker = await createTenant(p.db);
  listener = createServer((_req, res) => {
    listenerHits++;
    // Healthy, and a metric that would scale the deployment to its ceiling if it were read.
    res.setHeader('content-type', 'text/plain; version=0.0.4');
    res.end('# TYPE inflight_requests gauge\ninflight_requests 100\n');
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  listenerUrl = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
});
after(async () => {
  await p?.stop();
  listener?.close();
});

const api = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v1${url}`, { key: attacker.key, json });
const get = (name: string) => api('GET', `/deployments/${name}`).then((r) => r.body);
const spec = (name: string, extra: Record<string, unknown>) => ({
  name,
  image: 'example/http-replica:1',
  gpu_type: 'h100-80gb',
  command: [process.execPath, HTTP_REPLICA],
  health_check_path: '/health',
  min_replicas: 1,
  max_replicas: 3,
  termination_grace_period_seconds: 1,
  ...extra,
});
/** Every line the deployment's replicas logged, as the logs route gives them. */
async function logLines(name: string): Promise<string[]> {
  const d = await get(name);
  const lines: string[] = [];
  for (const replicaId of Object.keys(d.replica_events ?? {})) {
    const logs = await api('GET', `/deployments/${name}/logs?replica_id=${replicaId}`);
    lines.push(...(logs.body.lines ?? []));
  }
  return lines;
}

describe('the container host and a replica that redirects', () => {
  test('a health check answered with a redirect is not followed, and the replica is not Ready', async () => {
    const created = await api(
      'POST',
      '/deployments',
      spec('health-redirect', { health_check_path: `/redirect?to=${encodeURIComponent(`${listenerUrl}/health`)}` }),
    );
    assert.equal(created.status, 200, JSON.stringify(created.body));
    // The replica was asked, and answered with the redirect…
    await eventually(
      () => logLines('health-redirect'),
      (lines) => lines.some((l) => l.includes('redirected /redirect')),
      30_000,
    );
    // …and its launch ended without the host asking the listener.
    const failed = await eventually(
      () => get('health-redirect'),
      (d) =>
        d.status === 'Ready' ||
        Object.values(d.replica_events as Record<string, any>).some((e) => e.replica_status === 'Failed'),
      90_000,
    );
    assert.equal(listenerHits, 0, 'the host followed the redirect to a service on its own network');
    assert.notEqual(failed.status, 'Ready');
    assert.equal(failed.ready_replicas, 0);
    const message = Object.values(failed.replica_events as Record<string, any>)
      .map((e) => e.replica_status_message ?? '')
      .join(' ');
    assert.match(message, /redirect/i, 'the status says the health check answered a redirect');
    await api('DELETE', '/deployments/health-redirect');
  });

  test('the CustomMetric scrape does not follow a redirect from /metrics', async () => {
    const created = await api(
      'POST',
      '/deployments',
      spec('metrics-redirect', {
        environment_variables: [{ name: 'METRICS_REDIRECT', value: `${listenerUrl}/metrics` }],
        autoscaling: {
          metric: 'CustomMetric',
          custom_metric_name: 'inflight_requests',
          target: 1,
          time_interval_minutes: 0,
        },
      }),
    );
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await eventually(
      () => get('metrics-redirect'),
      (d) => d.status === 'Ready',
      30_000,
    );
    // Two scrapes reached the replica (a second one starts a round after the first was over, and
    // with it anything the first would have followed).
    await eventually(
      () => logLines('metrics-redirect'),
      (lines) => lines.filter((l) => l.includes('redirected /metrics')).length >= 2,
      30_000,
    );
    assert.equal(listenerHits, 0, 'the scrape followed the redirect to a service on the host');
    const d = await get('metrics-redirect');
    assert.equal(d.desired_replicas, 1, "the listener's metric was never read");
  });

  test('a health check path that is not a path of the replica is refused', async () => {
    const host = new URL(listenerUrl).host;
    for (const path of [`//${host}/`, `/\\${host}/`, `\\\\${host}/`, `@${host}/`, '/health\n', '/ health', 'health']) {
      const res = await api('POST', '/deployments', spec('bad-health-path', { health_check_path: path }));
      assert.equal(res.status, 400, `${JSON.stringify(path)}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, 'health_check_path', JSON.stringify(res.body));
    }
    const res = await api('PATCH', '/deployments/metrics-redirect', { health_check_path: `//${host}/` });
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.equal(res.body.error.param, 'health_check_path', JSON.stringify(res.body));
    // A path with a query is a path of the replica.
    const ok = await api('PATCH', '/deployments/metrics-redirect', { health_check_path: '/health?probe=1' });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });
});
