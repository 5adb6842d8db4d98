/**
 * Model calls made for a batch or an evaluation (activities/model-calls.ts) against a real
 * stack: they go through the gateway as the key's own calls do, answer final answers (2xx, 4xx)
 * apart from transient failures, are billed as the work's usage at the call's prices, reach
 * nothing but model calls with their credential, and stop when the key is revoked.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { callModel, KEY_REVOKED, ModelCallTransient, type ModelCallDeps } from '../../activities/model-calls';
import { setBillingUsageEnabled } from '../../db/usage-report';
import { freePort } from '../../platform/ports';
import { mintWorkCredential } from '../../platform/work-credentials';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { modelServerRequests, readyReferenceEndpoint } from '../helpers/reference-endpoint';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('model calls of batches and evaluations', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let model: string;
  let deps: ModelCallDeps;
  const work = { kind: 'batch' as const, id: 'batch-model-calls-test' };

  before(async () => {
    p = await startTestPlatform();
    tenant = await createTenant(p.db);
    model = await readyReferenceEndpoint(p, tenant, 'calls');
    deps = { apiUrl: p.baseUrl, gatewayUrl: p.gatewayUrl, keyring: p.config.keyring };
  });
  after(() => p.stop());

  test('a chat call answers as the gateway does, billed as batch usage; a bad body is a final 4xx', async () => {
    const body = { model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 };
    const answer = await callModel(deps, { apiKeyId: tenant.keyId, work, path: '/v1/chat/completions', body });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const usage = (answer.body as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
    assert.ok(usage.prompt_tokens > 0 && usage.completion_tokens > 0, JSON.stringify(usage));

    const bad = await callModel(deps, {
      apiKeyId: tenant.keyId,
      work,
      path: '/v1/chat/completions',
      body: { model: `${tenant.projectSlug}/no-such-endpoint`, messages: [] },
    });
    assert.equal(bad.status, 404, 'an answer to record, not a failure to retry');

    await setBillingUsageEnabled(p.db, tenant.organizationId, true);
    const billed = await eventually(
      async () =>
        (await call(p.baseUrl, 'GET', '/v1/billing/usage?granularity=hourly', { key: tenant.key })).body.data
          .flatMap((w: any) => w.line_items)
          .filter((i: any) => i.attributes.resource_id === work.id),
      (items: any[]) => items.length === 2,
    );
    const quantity = (product: string) => Number(billed.find((i: any) => i.product_name === product)?.quantity);
    assert.equal(quantity('Batch Inference - Input Tokens'), usage.prompt_tokens);
    assert.equal(quantity('Batch Inference - Output Tokens'), usage.completion_tokens);
  });

  test('a named call runs once: asked again, or twice at once, it gets the kept answer', async () => {
    const named = { kind: 'batch' as const, id: 'batch-named-calls-test' };
    const body = { model, messages: [{ role: 'user', content: 'once' }], max_tokens: 8 };
    const ask = (key: string) =>
      callModel(deps, { apiKeyId: tenant.keyId, work: named, path: '/v1/chat/completions', body, key });
    const before = await modelServerRequests(p, model);
    const [first, together] = await Promise.all([ask('line-0'), ask('line-0')]);
    const again = await ask('line-0');
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(together, first);
    assert.deepEqual(again, first);
    assert.equal((await modelServerRequests(p, model)) - before, 1, 'the model ran the named call once');
    const other = await ask('line-1');
    assert.equal(other.status, 200);
    assert.equal((await modelServerRequests(p, model)) - before, 2, 'another name is another call');

    // A key the worker would never write is refused, naming the header.
    const credential = mintWorkCredential(p.config.keyring!, tenant.keyId, named, 60);
    const res = await fetch(`${p.gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${credential}`,
        'content-type': 'application/json',
        'x-gantry-work-call': 'a b',
      },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as { error: { param: string } }).error.param, 'x-gantry-work-call');
    // A user's own call with the header is an ordinary call: made each time.
    for (let i = 0; i < 2; i++) {
      const r = await call(p.gatewayUrl, 'POST', '/v1/chat/completions', {
        key: tenant.key,
        json: body,
        headers: { 'x-gantry-work-call': 'line-0' },
      });
      assert.equal(r.status, 200);
    }
    assert.equal((await modelServerRequests(p, model)) - before, 4);
  });

  test('the credential makes model calls only', async () => {
    const credential = mintWorkCredential(p.config.keyring!, tenant.keyId, work, 60);
    const files = await call(p.baseUrl, 'GET', '/v1/files', { key: credential });
    assert.equal(files.status, 403, JSON.stringify(files.body));
    assert.equal(files.body.error.code, 'work_credential_scope');
    const models = await call(p.gatewayUrl, 'GET', '/v1/models', { key: credential });
    assert.equal(models.status, 403);
    const forged = `${credential.slice(0, -4)}0000`;
    assert.equal((await call(p.gatewayUrl, 'GET', '/v1/models', { key: forged })).status, 401);
  });

  test('an unreachable gateway is transient; a revoked key stops the work', async () => {
    const body = { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
    const closed = { ...deps, gatewayUrl: `http://127.0.0.1:${await freePort()}` };
    await assert.rejects(
      callModel(closed, { apiKeyId: tenant.keyId, work, path: '/v1/chat/completions', body }),
      ModelCallTransient,
    );
    const revoked = await call(p.baseUrl, 'DELETE', `/v1/api-keys/${tenant.keyId}`, { key: tenant.key });
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    await assert.rejects(
      callModel(deps, { apiKeyId: tenant.keyId, work, path: '/v1/chat/completions', body }),
      (err: Error & { type?: string }) => err.type === KEY_REVOKED,
    );
  });
});
