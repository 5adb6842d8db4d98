/**
 * The model registry through the API (`/v2/projects/{projectId}/models`):
 * register, list by cursor, read by id or name, update with and without an
 * update mask, revisions and files, delete (files gone too); strict bodies and
 * query strings; the supported-model catalog; isolation between projects and
 * sharing within an organization.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { addProjectMember, createApiKey, createProject } from '../../db/accounts';
import { insertRevision } from '../../db/models';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const BASE = 'gantry/reference-byte-tiny';
let p: TestPlatform;
let t: Tenant;
let stranger: Tenant;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
  stranger = await createTenant(p.db);
});
after(() => p.stop());

const v2 = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v2${url}`, { key, json });
const models = (tenant = t) => `/projects/${tenant.projectId}/models`;
const register = (name: string, extra: Record<string, unknown> = {}) =>
  v2('POST', models(), { baseModelId: BASE, name, type: 'model', ...extra });

describe('model registry', () => {
  test('register: names, types and base models are checked; bodies are strict', async () => {
    const m = await register('support-bot', { description: 'answers tickets' });
    assert.equal(m.status, 200, JSON.stringify(m.body));
    assert.match(m.body.id, /^ml_/);
    assert.equal(m.body.name, `${t.projectSlug}/support-bot`);
    assert.equal(m.body.projectId, t.projectId);
    assert.equal(m.body.organizationId, t.organizationId);
    assert.equal(m.body.visibility, 'VISIBILITY_PRIVATE');
    assert.deepEqual(m.body.weights, { type: 'WEIGHTS_TYPE_DEFAULT' });
    assert.equal(m.body.baseModelId, BASE);

    const qualified = await register(`${t.projectSlug}/adapter-1`, { type: 'adapters' });
    assert.equal(qualified.status, 200);
    assert.equal(qualified.body.weights.type, 'WEIGHTS_TYPE_ADAPTER');

    const cases: Array<[Record<string, unknown>, string]> = [
      [{ name: 'other-slug/x' }, 'name'],
      [{ name: 'has space' }, 'name'],
      [{ name: 'x1', type: 'dataset' }, 'type'],
      [{ name: 'x2', baseModelId: 'nobody/nothing' }, 'baseModelId'],
      [{ name: 'x3', colour: 'blue' }, 'colour'],
    ];
    for (const [extra, param] of cases) {
      const res = await register(String(extra.name), extra);
      assert.equal(res.status, 400, JSON.stringify(extra));
      assert.equal(res.body.error.param, param, JSON.stringify(res.body));
    }
    assert.equal((await register('support-bot')).status, 409);
    const unknownQuery = await v2('GET', `${models()}?colour=blue`);
    assert.equal(unknownQuery.status, 400);
    assert.equal(unknownQuery.body.error.param, 'colour');
  });

  test('list pages by cursor, newest first, without repeats', async () => {
    for (let i = 0; i < 5; i++) assert.equal((await register(`paged-${i}`)).status, 200);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await v2('GET', `${models()}?limit=2${cursor ? `&after=${cursor}` : ''}`);
      assert.equal(res.status, 200);
      assert.ok(res.body.data.length <= 2);
      seen.push(...res.body.data.map((m: { name: string }) => m.name.split('/')[1]));
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor && pages < 20);
    assert.equal(new Set(seen).size, seen.length, 'no model twice');
    const paged = seen.filter((n) => n.startsWith('paged-'));
    assert.deepEqual(paged, ['paged-4', 'paged-3', 'paged-2', 'paged-1', 'paged-0']);
    assert.ok(seen.includes('support-bot'));
    assert.equal((await v2('GET', `${models()}?after=garbage`)).status, 400);
  });

  test('read by id or name; update with a mask, and without one (every mutable field set)', async () => {
    const byName = await v2('GET', `${models()}/support-bot`);
    assert.equal(byName.status, 200);
    const id = byName.body.id;
    assert.equal((await v2('GET', `${models()}/${id}`)).body.name, byName.body.name);

    const masked = await v2('PATCH', `${models()}/${id}?updateMask=visibility`, {
      visibility: 'VISIBILITY_INTERNAL',
      description: 'ignored: not in the mask',
    });
    assert.equal(masked.status, 200, JSON.stringify(masked.body));
    assert.equal(masked.body.visibility, 'VISIBILITY_INTERNAL');
    assert.equal(masked.body.description, 'answers tickets');

    const whole = await v2('PATCH', `${models()}/${id}`, { description: 'answers faster' });
    assert.equal(whole.body.description, 'answers faster');
    assert.equal(whole.body.visibility, 'VISIBILITY_PRIVATE', 'no mask: visibility set to its default');
    assert.equal(whole.body.name, `${t.projectSlug}/support-bot`, 'a name is never cleared');

    assert.equal((await v2('PATCH', `${models()}/${id}?updateMask=weights`, {})).body.error.param, 'updateMask');
    assert.equal((await v2('PATCH', `${models()}/${id}`, { name: 'paged-1' })).status, 409);
    const renamed = await v2('PATCH', `${models()}/${id}?updateMask=name`, { name: 'support-bot-2' });
    assert.equal(renamed.body.name, `${t.projectSlug}/support-bot-2`);
  });

  test('revisions and files; delete removes the files from the blob store', async () => {
    const m = (await register('with-weights')).body;
    const content = Buffer.from('weights bytes');
    await p.blobs.put(`registry/${m.id}/rv_old/model.safetensors`, Readable.from([content]), { maxBytes: 1 << 20 });
    await p.blobs.put(`registry/${m.id}/rv_new/model.safetensors`, Readable.from([content]), { maxBytes: 1 << 20 });
    await p.blobs.put(`registry/${m.id}/rv_new/config.json`, Readable.from([Buffer.from('{}')]), {
      maxBytes: 1 << 20,
    });
    await insertRevision(p.db, {
      id: 'rv_old',
      modelId: m.id,
      blobPrefix: `registry/${m.id}/rv_old`,
      files: [{ path: 'model.safetensors', bytes: content.length, sha256: 'aa' }],
      validationStatus: 'REVISION_VALIDATION_STATUS_SUCCESS',
    });
    await new Promise((r) => setTimeout(r, 5));
    await insertRevision(p.db, {
      id: 'rv_new',
      modelId: m.id,
      blobPrefix: `registry/${m.id}/rv_new`,
      files: [
        { path: 'model.safetensors', bytes: content.length, sha256: 'bb' },
        { path: 'config.json', bytes: 2, sha256: 'cc' },
      ],
      validationStatus: 'REVISION_VALIDATION_STATUS_SUCCESS',
    });

    const revisions = await v2('GET', `${models()}/${m.id}/revisions`);
    assert.deepEqual(
      revisions.body.data.map((r: { revisionId: string }) => r.revisionId),
      ['rv_new', 'rv_old'],
    );
    const newest = await v2('GET', `${models()}/${m.id}/files`);
    assert.equal(newest.body.revisionId, 'rv_new');
    assert.deepEqual(
      newest.body.data.map((f: { path: string }) => f.path),
      ['config.json', 'model.safetensors'],
    );
    assert.equal(newest.body.totalSizeBytes, String(content.length + 2));
    assert.equal(newest.body.data[1].hash, 'sha256:bb');
    const old = await v2('GET', `${models()}/${m.id}/files?revisionId=rv_old`);
    assert.equal(old.body.data.length, 1);
    assert.equal((await v2('GET', `${models()}/${m.id}/files?revisionId=rv_nope`)).status, 404);

    const del = await v2('DELETE', `${models()}/${m.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, {});
    assert.equal((await v2('GET', `${models()}/${m.id}`)).status, 404);
    assert.equal(await p.blobs.size(`registry/${m.id}/rv_new/model.safetensors`), null);
    assert.equal(await p.blobs.size(`registry/${m.id}/rv_old/model.safetensors`), null);
  });

  test('projects are isolated; the organization sees what is shared with it', async () => {
    const other = await v2('GET', models(), undefined, stranger.key);
    assert.equal(other.status, 404, 'another project in the path');
    assert.equal((await v2('GET', `${models()}/support-bot-2`, undefined, stranger.key)).status, 404);
    const theirs = await v2('GET', models(stranger), undefined, stranger.key);
    assert.deepEqual(theirs.body.data, []);

    // A second project of the same organization.
    const projectId = await createProject(p.db, {
      organizationId: t.organizationId,
      name: 'Sibling',
      slug: `sib-${t.projectSlug}`,
    });
    await addProjectMember(p.db, projectId, t.userId, 'Editor');
    const sibling = (await createApiKey(p.db, { projectId, userId: t.userId, name: 'sibling' })).secret;
    const shared = await register('shared-base');
    await v2('PATCH', `${models()}/${shared.body.id}?updateMask=visibility`, { visibility: 'VISIBILITY_INTERNAL' });
    const seen = await v2('GET', `/projects/${projectId}/models?limit=100`, undefined, sibling);
    const names = seen.body.data.map((m: { name: string }) => m.name);
    assert.ok(names.includes(`${t.projectSlug}/shared-base`), 'shared with the organization');
    assert.ok(!names.includes(`${t.projectSlug}/paged-0`), 'private stays in its project');
    const org = await v2('GET', `/organizations/${t.organizationId}/models?limit=100`, undefined, sibling);
    assert.ok(org.body.data.some((m: { name: string }) => m.name === `${t.projectSlug}/shared-base`));
    assert.equal((await v2('GET', `/organizations/${stranger.organizationId}/models`)).status, 404);
    // Shared is read-only elsewhere: the sibling cannot change or delete it.
    assert.equal(
      (await v2('DELETE', `/projects/${projectId}/models/${shared.body.id}`, undefined, sibling)).status,
      404,
    );
  });

  test('supported models; the v2 routes answer under /v1 too (the SDK with one baseURL)', async () => {
    const list = await v2('GET', '/supported-models');
    assert.equal(list.status, 200);
    assert.ok(list.body.data.some((m: { id: string }) => m.id === BASE));
    const one = await v2('GET', `/supported-models/${encodeURIComponent(BASE)}`);
    assert.equal(one.body.contextLength, '256');
    assert.equal((await v2('GET', '/supported-models/nobody%2Fnothing')).status, 404);
    const filtered = await v2('GET', '/supported-models?search=qwen3');
    assert.ok(filtered.body.data.length > 0);
    assert.ok(filtered.body.data.every((m: { id: string }) => m.id.toLowerCase().includes('qwen3')));

    const v1 = await call(p.baseUrl, 'GET', `/v1/projects/${t.projectId}/models`, { key: t.key });
    assert.equal(v1.status, 200);
    assert.ok(v1.body.data.length > 0);
    assert.equal((await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/models`)).status, 401);
  });
});
