/**
 * Deployment profiles (`cr_…`, the SDK's beta.models.configs): the reference
 * family has one public profile, used without naming it; once an operator
 * adds a second for a project (bfloat16 weights, at most 4 tokens per request), a deploy
 * must name one, and the named profile reaches the model server: it refuses
 * a request for more tokens than the profile allows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
  admin = await createTenant(p.db, { platformAdmin: true });
});
after(() => p.stop());

const v2 = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key, json });
const BASE = 'gantry/reference-byte-tiny';

describe('deployment profiles', () => {
  test('one public profile: listed for the model, used without naming it', async () => {
    const list = await v2('GET', `/configs?referenceModelId=${encodeURIComponent(BASE)}`);
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assert.deepEqual(
      list.body.data.map((c: { id: string }) => c.id),
      ['cr_reference-byte-tiny-fp32'],
    );
    const one = await v2('GET', '/configs/cr_reference-byte-tiny-fp32');
    assert.equal(one.body.referenceModelId, 'gantry--reference-byte-tiny', 'the catalog id of BASE: no `/`');
    assert.ok(
      one.body.selectors.some((s: { key: string; value: string }) => s.key === 'dtype' && s.value === 'float32'),
    );
    assert.equal((await v2('GET', '/configs/cr_nope')).status, 404);

    assert.equal((await v2('POST', '/endpoints', { name: 'profiled' })).status, 200);
    const d = await v2('POST', '/endpoints/profiled/deployments', {
      name: 'plain',
      modelId: BASE,
      autoscaling: { minReplicas: 0, maxReplicas: 1 },
      validateOnly: true,
    });
    assert.equal(d.status, 200, JSON.stringify(d.body));
  });

  test('with two profiles a deploy names one; the profile reaches the model server', async () => {
    const refused = await call(p.baseUrl, 'POST', '/v1/admin/configs', {
      key: t.key,
      json: { referenceModelId: BASE, selectors: [{ key: 'dtype', value: 'bfloat16' }] },
    });
    assert.equal(refused.status, 403);
    const bad = await call(p.baseUrl, 'POST', '/v1/admin/configs', {
      key: admin.key,
      json: { referenceModelId: BASE, selectors: [{ key: 'dtype', value: 'float8' }] },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'selectors[0].value');
    const created = await call(p.baseUrl, 'POST', '/v1/admin/configs', {
      key: admin.key,
      json: {
        referenceModelId: BASE,
        projectId: t.projectId,
        selectors: [
          { key: 'dtype', value: 'bfloat16' },
          { key: 'max_tokens_limit', value: '4' },
        ],
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const profile = created.body.id;
    assert.match(profile, /^cr_/);
    assert.equal(created.body.projectId, t.projectId);
    // The profile is the project's own: another project still sees the one public profile.
    const other = await createTenant(p.db);
    const theirs = await call(p.baseUrl, 'GET', `/v2/projects/${other.projectId}/configs`, { key: other.key });
    assert.deepEqual(
      theirs.body.data.map((c: { id: string }) => c.id),
      ['cr_reference-byte-tiny-fp32'],
    );

    const unnamed = await v2('POST', '/endpoints/profiled/deployments', {
      name: 'small',
      modelId: BASE,
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
    });
    assert.equal(unnamed.status, 400);
    assert.equal(unnamed.body.error.param, 'config');
    assert.match(unnamed.body.error.message, new RegExp(`2 deployment profiles .*${profile}`));
    const unknown = await v2('POST', '/endpoints/profiled/deployments', {
      name: 'small',
      modelId: BASE,
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
      configId: 'cr_nope',
    });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.error.param, 'configId');

    const deployed = await v2('POST', '/endpoints/profiled/deployments', {
      name: 'small',
      modelId: BASE,
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
      config: `projects/${t.projectId}/configs/${profile}`,
    });
    assert.equal(deployed.status, 200, JSON.stringify(deployed.body));
    assert.equal(deployed.body.configId, profile);
    await eventually(
      () => v2('GET', `/endpoints/profiled/deployments/small`).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
      90_000,
    );
    const infer = (max_tokens: number) =>
      call(p.gatewayUrl, 'POST', '/v1/completions', {
        key: t.key,
        json: { model: `${t.projectSlug}/profiled`, prompt: 'hello', max_tokens, temperature: 0 },
      });
    const within = await infer(4);
    assert.equal(within.status, 200, JSON.stringify(within.body));
    assert.equal(within.body.usage.completion_tokens, 4);
    const beyond = await infer(5);
    assert.equal(beyond.status, 400);
    assert.match(beyond.body.error.message, /allows at most 4/);
  });
});
