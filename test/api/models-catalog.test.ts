/**
 * The model catalog (`GET /v1/models`): the fine-tunable bases, the speech
 * models (type `transcribe`), the project's own dedicated endpoints and registered models;
 * `dedicated=true` keeps only those; one model by id; an unknown id is a 404.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let other: Tenant;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
  other = await createTenant(p.db);
  const res = await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/endpoints`, {
    key: t.key,
    json: { name: 'mine' },
  });
  assert.equal(res.status, 200);
  const model = await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/models`, {
    key: t.key,
    json: { baseModelId: 'gantry/reference-byte-tiny', name: 'registered-one', type: 'model' },
  });
  assert.equal(model.status, 200, JSON.stringify(model.body));
});
after(() => p.stop());

describe('model catalog', () => {
  test('bases, speech models and the project’s endpoints; dedicated=true keeps the endpoints', async () => {
    const all = await call(p.baseUrl, 'GET', '/v1/models', { key: t.key });
    assert.equal(all.status, 200);
    const byId = new Map(all.body.map((m: { id: string }) => [m.id, m]));
    const whisper = byId.get('openai/whisper-base') as Record<string, unknown>;
    assert.equal(whisper.type, 'transcribe');
    assert.equal(whisper.object, 'model');
    assert.equal((byId.get('openai/whisper-tiny.en') as { type: string }).type, 'transcribe');
    const base = byId.get('gantry/reference-byte-tiny') as { type: string; pricing: { finetune: number } };
    assert.equal(base.type, 'chat');
    assert.equal(base.pricing.finetune, 0.48);
    assert.ok(byId.has(`${t.projectSlug}/mine`));
    assert.equal(whisper.pricing && (whisper.pricing as { base: number }).base, 0.0015, 'per minute of audio');
    const registered = byId.get(`${t.projectSlug}/registered-one`) as { type: string; display_name: string };
    assert.equal(registered.type, 'chat');
    assert.equal(registered.display_name, 'registered-one');
    const theirAll = await call(p.baseUrl, 'GET', '/v1/models', { key: other.key });
    assert.ok(!theirAll.body.some((m: { id: string }) => m.id.startsWith(`${t.projectSlug}/`)));

    const dedicated = await call(p.baseUrl, 'GET', '/v1/models?dedicated=true', { key: t.key });
    assert.deepEqual(
      dedicated.body.map((m: { id: string }) => m.id),
      [`${t.projectSlug}/mine`],
    );
    const theirs = await call(p.baseUrl, 'GET', '/v1/models?dedicated=true', { key: other.key });
    assert.deepEqual(theirs.body, [], "another project's endpoints are not in its catalog");
  });

  test('one model by id; an unknown id is a 404', async () => {
    const one = await call(p.baseUrl, 'GET', '/v1/models/openai/whisper-base', { key: t.key });
    assert.equal(one.status, 200);
    assert.equal(one.body.id, 'openai/whisper-base');
    const missing = await call(p.baseUrl, 'GET', '/v1/models/openai/whisper-large-v3', { key: t.key });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'model_not_found');
    assert.equal((await call(p.baseUrl, 'GET', '/v1/models', {})).status, 401);
  });
});
