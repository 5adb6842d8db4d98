/**
 * The official SDK's beta.models against Gantry, changing nothing but
 * baseURL, apiKey and projectID (the SDK's own options): register, list with
 * its cursor pager, retrieve, update with an update mask, revisions, files,
 * the supported-model catalog, delete.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('official SDK: beta.models', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;

  before(async () => {
    p = await startTestPlatform();
    tenant = await createTenant(p.db);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, projectID: tenant.projectId, maxRetries: 0 });
  });
  after(() => p.stop());

  test('register, page through, update, inspect and delete models with the SDK', async () => {
    const created = [];
    for (const name of ['sdk-a', 'sdk-b', 'sdk-c']) {
      created.push(
        await client.beta.models.create({ baseModelId: 'gantry/reference-byte-tiny', name, type: 'model' }),
      );
    }
    assert.equal(created[0].name, `${tenant.projectSlug}/sdk-a`);

    const names: string[] = [];
    for await (const m of client.beta.models.list({ limit: 1 })) names.push(m.name);
    assert.deepEqual(names, ['c', 'b', 'a'].map((x) => `${tenant.projectSlug}/sdk-${x}`), 'the pager followed every cursor');

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
});
