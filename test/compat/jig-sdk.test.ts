/**
 * The official SDK's beta.jig (deployments, secrets, volumes, queue) against Gantry,
 * changing nothing but baseURL and apiKey.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { QueueWorker } from '../../worker-kit/queue-worker';

const SERVER = path.resolve(__dirname, '../../examples/http-replica/server.mjs');

describe('official SDK: beta.jig', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;

  before(async () => {
    p = await startTestPlatform();
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, maxRetries: 0 });
  });
  after(() => p.stop());

  test('deploy, a queue job through a worker, and destroy, with the SDK', async () => {
    const secret = await client.beta.jig.secrets.create({ name: 'sdk-token', value: 'v' });
    assert.equal(secret.name, 'sdk-token');
    assert.ok((await client.beta.jig.secrets.list()).data?.some((s) => s.id === secret.id));

    const d = await client.beta.jig.deploy({
      name: 'sdk-app',
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, SERVER],
      health_check_path: '/health',
      min_replicas: 1,
      environment_variables: [{ name: 'TOKEN', value_from_secret: 'sdk-token' }],
    });
    assert.equal(d.object, 'deployment');
    const ready = await eventually(
      () => client.beta.jig.retrieve('sdk-app'),
      (x) => x.status === 'Ready',
      30_000,
    );
    assert.equal(ready.ready_replicas, 1);
    assert.ok((await client.beta.jig.list()).data?.some((x) => x.id === d.id));
    const logs = await client.beta.jig.retrieveLogs('sdk-app');
    assert.ok(logs.lines?.some((l) => l.includes('listening on')));

    const { requestId } = await client.beta.jig.queue.submit({
      model: 'sdk-app',
      payload: { x: 1 },
      priority: 2,
      info: { who: 'sdk' },
    });
    const pending = await client.beta.jig.queue.retrieve({ model: 'sdk-app', request_id: requestId });
    assert.equal(pending.status, 'pending');
    const metrics = await client.beta.jig.queue.metrics({ model: 'sdk-app' });
    assert.equal(metrics.messages_waiting, 1);
    const worker = new QueueWorker({ baseUrl: p.baseUrl, apiKey: tenant.key, model: 'sdk-app', waitSeconds: 0 });
    const job = (await worker.claim())!;
    assert.equal(await worker.process(job, async (j) => ({ doubled: (j.payload.x as number) * 2 })), 'done');
    const done = await client.beta.jig.queue.retrieve({ model: 'sdk-app', request_id: requestId });
    assert.equal(done.status, 'done');
    assert.deepEqual(done.outputs, { doubled: 2 });
    assert.deepEqual(done.info, { who: 'sdk' });

    const second = await client.beta.jig.queue.submit({ model: 'sdk-app', payload: {} });
    assert.equal(
      (await client.beta.jig.queue.cancel({ model: 'sdk-app', request_id: second.requestId })).status,
      'canceled',
    );
    assert.equal((await client.beta.jig.queue.clear({ model: 'sdk-app' })).canceled_count, 0);

    await client.beta.jig.destroy('sdk-app');
    await eventually(
      () =>
        client.beta.jig.retrieve('sdk-app').then(
          () => 'still there',
          (e) => (e as { status?: number }).status,
        ),
      (s) => s === 404,
      30_000,
    );
    await client.beta.jig.secrets.delete(secret.id!);
  });

  test('volumes with the SDK: create, list, retrieve a version, update content, delete', async () => {
    await uploadValidated(p, tenant.key, 'sdk-vol-1.jsonl', '{"text": "a"}\n');
    const v = await client.beta.jig.volumes.create({
      name: 'sdk-vol',
      type: 'readOnly',
      content: { type: 'files', source_prefix: 'sdk-vol-' },
    });
    assert.equal(v.current_version, 1);
    assert.deepEqual(
      v.content?.files?.map((f) => f.name),
      ['sdk-vol-1.jsonl'],
    );
    assert.ok((await client.beta.jig.volumes.list()).data?.some((x) => x.id === v.id));
    await uploadValidated(p, tenant.key, 'sdk-vol-2.jsonl', '{"text": "b"}\n');
    const updated = await client.beta.jig.volumes.update('sdk-vol', { content: { source_prefix: 'sdk-vol-' } });
    assert.equal(updated.current_version, 2);
    assert.equal(updated.content?.files?.length, 2);
    const first = await client.beta.jig.volumes.retrieve('sdk-vol', { version: 1 });
    assert.equal(first.content?.files?.length, 1);
    assert.deepEqual(Object.keys(first.version_history ?? {}), ['1', '2']);
    await client.beta.jig.volumes.delete(v.id!);
    await assert.rejects(client.beta.jig.volumes.retrieve(v.id!), (e: { status?: number }) => e.status === 404);
  });
});
