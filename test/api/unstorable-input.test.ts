/**
 * Inputs a property-based run of the OpenAPI document found to end in a 500:
 * each is now a 400 that names its field, and the request stored nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;

before(async () => {
  p = await startTestPlatform({ containers: false });
  t = await createTenant(p.db);
  admin = await createTenant(p.db, { platformAdmin: true });
});
after(() => p.stop());

/** The error answer, as a client reads it. */
async function refusal(method: string, path: string, opts: { key?: string; json?: unknown; body?: string } = {}) {
  const headers = opts.body === undefined ? undefined : { 'content-type': 'application/json' };
  const res = await call(p.baseUrl, method, path, { key: t.key, headers, ...opts });
  return { status: res.status, param: res.body?.error?.param, message: String(res.body?.error?.message ?? '') };
}

describe('input PostgreSQL cannot store, and numbers beyond its columns', () => {
  test('a NUL byte in a query parameter', async () => {
    const r = await refusal('GET', '/v1/queue/metrics?model=a%00b');
    assert.deepEqual([r.status, r.param], [400, 'model'], r.message);
  });

  test('a lone surrogate in a JSON string, and in a key of a free-form object', async () => {
    // Written by hand: JSON.stringify would escape the surrogate the same way, as \ud800.
    const secret = await refusal('POST', '/v1/deployments/secrets', {
      body: '{"name":"tok","value":"abc\\ud800"}',
      key: t.key,
    });
    assert.deepEqual([secret.status, secret.param], [400, 'value'], secret.message);
    const listed = await call(p.baseUrl, 'GET', '/v1/deployments/secrets', { key: t.key });
    assert.equal(listed.body.data.length, 0, 'nothing was stored');
    const job = await refusal('POST', '/v1/queue/submit', {
      body: '{"model":"m","payload":{"k\\udc00":1},"priority":1}',
    });
    assert.deepEqual([job.status, job.param], [400, 'payload'], job.message);
  });

  test('integers beyond a PostgreSQL integer', async () => {
    const volume = await refusal('POST', '/v1/compute/clusters/storage/volumes', {
      json: { region: 'us-central-8', size_tib: 2 ** 40, volume_name: 'big' },
    });
    assert.deepEqual([volume.status, volume.param], [400, 'size_tib'], volume.message);
    const workload = await refusal('PUT', '/v1/compute/fleet/clusters/c-1/workload', {
      key: admin.key,
      json: { pending_gpu_requests: 2 ** 40 },
    });
    assert.deepEqual([workload.status, workload.param], [400, 'pending_gpu_requests'], workload.message);
  });

  test('an over-long file id in a pre-signed upload URL', async () => {
    const r = await refusal('PUT', `/v1/files/${'f'.repeat(300)}/upload?token=x`, { body: 'x' });
    assert.deepEqual([r.status, r.param], [400, 'id'], r.message);
  });
});
