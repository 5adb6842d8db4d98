/**
 * An installation with no container host (GANTRY_CONTAINER_RUNTIME=none on
 * every control worker): a deployment fails, and its replica events say why
 * and what to change, instead of waiting forever in silence.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ containers: false, env: { GANTRY_CONTAINER_QUEUE_WAIT_SECONDS: '1' } });
  t = await createTenant(p.db);
});
after(() => p.stop());

describe('deployments without a container host', () => {
  test('the deployment fails and its replica events name the missing runtime', async () => {
    const api = (method: string, url: string, json?: unknown) =>
      call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });
    const res = await api('POST', '/deployments', {
      name: 'homeless',
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: ['true'],
      min_replicas: 1,
    });
    assert.equal(res.status, 200);
    const failed = await eventually(
      () => api('GET', '/deployments/homeless').then((r) => r.body),
      (d) => d.status === 'Failed',
      30_000,
    );
    const events = Object.values(failed.replica_events) as any[];
    assert.ok(events.length >= 3, 'it kept trying, with backoff');
    for (const e of events) {
      assert.equal(e.replica_status, 'Failed');
      assert.equal(e.replica_status_reason, 'NoContainerHost');
      assert.match(e.replica_status_message, /GANTRY_CONTAINER_RUNTIME=podman/);
    }
    await api('DELETE', '/deployments/homeless');
    await eventually(
      () => api('GET', '/deployments/homeless'),
      (r) => r.status === 404,
      30_000,
    );
  });
});
