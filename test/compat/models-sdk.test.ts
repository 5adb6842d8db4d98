/**
 * The official SDK's beta.models against Gantry, changing nothing but
 * baseURL, apiKey and projectID (the SDK's own options): register, list with
 * its cursor pager, retrieve, update with an update mask, revisions, files,
 * the supported-model catalog, delete; and remoteUploads (an import from a URL
 * the test serves, its events).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('official SDK: beta.models', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;

  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' } });
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, projectID: tenant.projectId, maxRetries: 0 });
  });
  after(() => p.stop());

  test('register, page through, update, inspect and delete models with the SDK', async () => {
    const created = [];
    for (const name of ['sdk-a', 'sdk-b', 'sdk-c']) {
      created.push(await client.beta.models.create({ baseModelId: 'gantry/reference-byte-tiny', name, type: 'model' }));
    }
    assert.equal(created[0].name, `${tenant.projectSlug}/sdk-a`);

    const names: string[] = [];
    for await (const m of client.beta.models.list({ limit: 1 })) names.push(m.name);
    assert.deepEqual(
      names,
      ['c', 'b', 'a'].map((x) => `${tenant.projectSlug}/sdk-${x}`),
      'the pager followed every cursor',
    );

    const updated = await client.beta.models.update(created[1].id, {
      updateMask: 'description',
      description: 'second',
    });
    assert.equal(updated.description, 'second');
    assert.equal((await client.beta.models.retrieve(created[1].id)).description, 'second');

    const revisions = await client.beta.models.listRevisions(created[1].id);
    assert.deepEqual(revisions.data, [], 'registered, no weights yet');
    const files = await client.beta.models.listFiles(created[1].id);
    assert.deepEqual(files.data, []);

    const supported = [];
    for await (const m of client.beta.models.listSupported()) supported.push(m.id);
    assert.ok(supported.includes('gantry/reference-byte-tiny'));
    assert.equal((await client.beta.models.retrieveSupported('gantry/reference-byte-tiny')).contextLength, '256');

    const shared = [];
    for await (const m of client.beta.models.listOrgScoped(tenant.organizationId)) shared.push(m.id);
    assert.equal(shared.length, 3, "the organization's view includes the project's own models");

    await client.beta.models.delete(created[0].id);
    await assert.rejects(client.beta.models.retrieve(created[0].id), (e: { status?: number }) => e.status === 404);
  });

  test('remoteUploads: import a model from a URL and read its events', async () => {
    const header = Buffer.from(JSON.stringify({ w: { dtype: 'F32', shape: [4], data_offsets: [0, 16] } }));
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(header.length));
    const weights = Buffer.concat([len, header, Buffer.alloc(16)]);
    const server = createServer((_req, res) => res.end(weights));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const model = await client.beta.models.create({
        baseModelId: 'gantry/reference-byte-tiny',
        name: 'sdk-imported',
        type: 'model',
      });
      const started = await client.beta.models.remoteUploads.create({
        modelId: model.id,
        remoteUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/model.safetensors`,
      });
      assert.equal(started.status, 'REMOTE_UPLOAD_STATUS_PENDING');
      let upload = await client.beta.models.remoteUploads.retrieve(started.id);
      for (
        let i = 0;
        i < 100 && !['REMOTE_UPLOAD_STATUS_SUCCEEDED', 'REMOTE_UPLOAD_STATUS_FAILED'].includes(upload.status);
        i++
      ) {
        await new Promise((r) => setTimeout(r, 200));
        upload = await client.beta.models.remoteUploads.retrieve(started.id);
      }
      assert.equal(upload.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', upload.statusMessage);
      const events = await client.beta.models.remoteUploads.events(started.id);
      assert.equal(events.data.at(-1)?.type, 'upload.succeeded');
      const ids = [];
      for await (const u of client.beta.models.remoteUploads.list()) ids.push(u.id);
      assert.deepEqual(ids, [started.id]);
      const files = await client.beta.models.listFiles(model.id);
      assert.deepEqual(
        files.data.map((f) => f.path),
        ['model.safetensors'],
      );
    } finally {
      server.close();
    }
  });
});
