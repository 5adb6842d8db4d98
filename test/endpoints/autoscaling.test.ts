/**
 * An endpoint deployment autoscales under load: with `inflight_requests` as
 * its scaling metric (the model server's in-flight gauge, scraped from every
 * replica), concurrent generations through the gateway take it from one
 * replica to two, and when the load stops it goes back to one. Both moves are
 * endpoint events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({
    env: { GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1', GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '2' },
  });
  t = await createTenant(p.db);
});
after(() => p.stop());

const v2 = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });

describe('endpoint autoscaling', () => {
  test('load through the gateway adds a replica; idle takes it away', async () => {
    assert.equal((await v2('POST', '/endpoints', { name: 'busy' })).status, 200);
    const created = await v2('POST', '/endpoints/busy/deployments', {
      name: 'one',
      modelId: 'gantry/reference-byte-tiny',
      autoscaling: {
        minReplicas: 1,
        maxReplicas: 2,
        scaleDownWindow: '0s',
        scalingMetrics: [{ name: 'inflight_requests', target: 1, type: 'METRIC_TARGET_TYPE_AVERAGE_VALUE' }],
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const deployment = () => v2('GET', '/endpoints/busy/deployments/one').then((r) => r.body);
    await eventually(
      deployment,
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
      60_000,
    );

    let loading = true;
    let served = 0;
    const clients = Array.from({ length: 4 }, async () => {
      while (loading) {
        const res = await call(p.gatewayUrl, 'POST', '/v1/completions', {
          key: t.key,
          json: { model: `${t.projectSlug}/busy`, prompt: 'load', max_tokens: 200, temperature: 1, seed: served },
        });
        if (res.status === 200) served++;
      }
    });
    try {
      const scaled = await eventually(deployment, (d) => d.status.readyReplicas === 2, 60_000);
      assert.equal(scaled.desiredReplicas, 2);
    } finally {
      loading = false;
      await Promise.all(clients);
    }
    assert.ok(served > 0);
    await eventually(deployment, (d) => d.desiredReplicas === 1 && d.status.readyReplicas === 1, 60_000);

    const changes = (await v2('GET', '/endpoints/busy/events?types=deployment.replicas_changed')).body.data.map(
      (e: { oldReplicas: number; newReplicas: number }) => [e.oldReplicas, e.newReplicas],
    );
    assert.deepEqual(
      changes,
      [
        [2, 1],
        [1, 2],
      ],
      'newest first',
    );
  });
});
