/**
 * The model catalog (`GET /v1/models`): what a key can call, with context length and price: the
 * speech models (type `transcribe`) and the project's own dedicated endpoints (a base or a
 * registered model is called once deployed, and is not listed before); `dedicated=true` keeps the
 * endpoints; one model by id; an unknown id is a 404.
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
  const deployed = await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/endpoints/mine/deployments`, {
    key: t.key,
    json: { name: 'one', modelId: 'gantry/reference-byte-tiny', autoscaling: { minReplicas: 0, maxReplicas: 0 } },
  });
  assert.equal(deployed.status, 200, JSON.stringify(deployed.body));
  const model = await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/models`, {
    key: t.key,
    json: { baseModelId: 'gantry/reference-byte-tiny', name: 'registered-one', type: 'model' },
  });
  assert.equal(model.status, 200, JSON.stringify(model.body));
});
after(() => p.stop());

describe('model catalog', () => {
  test('what can be called: speech models and the project’s endpoints, each priced; dedicated=true keeps the endpoints', async () => {
    const all = await call(p.baseUrl, 'GET', '/v1/models', { key: t.key });
    assert.equal(all.status, 200);
    const byId = new Map(all.body.map((m: { id: string }) => [m.id, m]));
    const whisper = byId.get('openai/whisper-base') as Record<string, unknown>;
    assert.equal(whisper.type, 'transcribe');
    assert.equal(whisper.object, 'model');
    assert.equal((byId.get('openai/whisper-tiny.en') as { type: string }).type, 'transcribe');
    assert.equal(whisper.pricing && (whisper.pricing as { base: number }).base, 0.0015, 'per minute of audio');
    const endpoint = byId.get(`${t.projectSlug}/mine`) as { type: string; context_length: number; pricing: any };
    assert.equal(endpoint.type, 'chat');
    assert.equal(endpoint.context_length, 256, "the reference model's context");
    assert.equal(endpoint.pricing.hourly, 0.1, 'per replica-hour of its CPU model server');
    assert.equal(endpoint.pricing.input, 0);
    for (const m of all.body) assert.ok(m.pricing && m.context_length, `${m.id} has a price and a context length`);
    // Not callable until deployed behind an endpoint: listed at /v2/supported-models and /v2/projects/{p}/models.
    // (A catalog model with a serverless pool is callable by name: test/endpoints/serverless.test.ts.)
    assert.ok(!byId.has('Qwen/Qwen3-8B'));
    assert.ok(!byId.has(`${t.projectSlug}/registered-one`));
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
