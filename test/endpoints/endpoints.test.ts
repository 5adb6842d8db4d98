/**
 * Dedicated endpoints through the v2 API and the inference gateway: an
 * endpoint with a deployment of the reference base model reaches
 * DEPLOYMENT_STATE_READY (its replica runs the real model server); chat and
 * text completions by endpoint string, streamed or not, with usage; events
 * across the deployment's life; strict bodies and queries; the retired v1
 * create; a model without weights here fails with a reason; other projects
 * see and call nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { setBillingUsageEnabled } from '../../db/usage-report';
import { createTenant, type Tenant } from '../helpers/tenants';

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
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key, json });
const infer = (path: string, json: unknown, key = t.key) => call(p.gatewayUrl, 'POST', `/v1${path}`, { key, json });

describe('dedicated endpoints', () => {
  let endpointId = '';
  let deploymentId = '';

  test('create an endpoint; strict bodies and queries; v1 create is retired', async () => {
    const e = await v2('POST', '/endpoints', { name: 'chat' });
    assert.equal(e.status, 200, JSON.stringify(e.body));
    assert.match(e.body.id, /^ep_/);
    assert.equal(e.body.endpointType, 'ENDPOINT_TYPE_DEDICATED');
    assert.deepEqual(e.body.deployments, []);
    endpointId = e.body.id;

    const extra = await v2('POST', '/endpoints', { name: 'x', colour: 'blue' });
    assert.equal(extra.status, 400);
    assert.equal(extra.body.error.param, 'colour');
    const query = await v2('GET', '/endpoints?colour=blue');
    assert.equal(query.status, 400);
    assert.equal(query.body.error.param, 'colour');
    assert.equal((await v2('POST', '/endpoints', { name: 'chat' })).status, 409);

    const v1 = await call(p.baseUrl, 'POST', '/v1/endpoints', { key: t.key, json: { model: 'x' } });
    assert.equal(v1.status, 403);
    assert.equal(v1.body.error.code, 'endpoints_v1_create_access_disabled');
  });

  test('a deployment of the reference base model becomes READY and answers through the gateway', async () => {
    const created = await v2('POST', `/endpoints/${endpointId}/deployments`, {
      name: 'base',
      modelId: 'gantry/reference-byte-tiny',
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    deploymentId = created.body.id;
    assert.equal(created.body.status.state, 'DEPLOYMENT_STATE_PROVISIONING');
    const ready = await eventually(
      () => v2('GET', `/endpoints/${endpointId}/deployments/${deploymentId}`).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY',
      90_000,
    );
    assert.equal(ready.status.readyReplicas, 1);

    const model = `${t.projectSlug}/chat`;
    const chat = await infer('/chat/completions', {
      model,
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(chat.status, 200, JSON.stringify(chat.body));
    assert.equal(chat.body.object, 'chat.completion');
    assert.equal(chat.body.choices[0].message.role, 'assistant');
    assert.equal(typeof chat.body.choices[0].message.content, 'string');
    // The prompt through the reference chat template: BOS + "user: hello\nassistant: " in bytes.
    assert.equal(chat.body.usage.prompt_tokens, 1 + Buffer.byteLength('user: hello\nassistant: '));
    assert.ok(chat.body.usage.completion_tokens >= 1 && chat.body.usage.completion_tokens <= 8);
    assert.equal(chat.body.usage.total_tokens, chat.body.usage.prompt_tokens + chat.body.usage.completion_tokens);

    // Greedy decoding is deterministic: the same request gives the same text.
    const again = await infer('/chat/completions', {
      model,
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(again.body.choices[0].message.content, chat.body.choices[0].message.content);

    const text = await infer('/completions', { model, prompt: 'abc', max_tokens: 4, temperature: 0.8, seed: 1 });
    assert.equal(text.status, 200);
    assert.equal(text.body.object, 'text_completion');
    assert.equal(text.body.usage.prompt_tokens, 4);

    const res = await fetch(`${p.gatewayUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model,
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 5,
        temperature: 1,
        seed: 7,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    assert.equal(events.at(-1), 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    assert.equal(chunks[0].object, 'chat.completion.chunk');
    assert.equal(chunks.at(-1).usage.completion_tokens, 5);
    assert.equal(chunks.at(-2).choices[0].finish_reason, 'length');

    // The gateway records every answer's tokens for the endpoint, streamed ones included.
    const answered = [chat.body.usage, again.body.usage, text.body.usage, chunks.at(-1).usage];
    const total = (field: string) => answered.reduce((n, u) => n + u[field], 0);
    await setBillingUsageEnabled(p.db, t.organizationId, true);
    const tokenLines = () =>
      call(p.baseUrl, 'GET', '/v1/billing/usage', { key: t.key }).then((r) =>
        r.body.data.flatMap((w: any) => w.line_items).filter((i: any) => i.attributes.resource_id === endpointId),
      );
    const lines = await eventually(
      tokenLines,
      (l) => l.length === 2 && Number(l[1].quantity) === total('completion_tokens'),
      10_000,
    );
    const byProduct = Object.fromEntries(lines.map((l: any) => [l.product_name, l]));
    assert.equal(Number(byProduct['Dedicated Inference - Input Tokens'].quantity), total('prompt_tokens'));
    assert.equal(Number(byProduct['Dedicated Inference - Output Tokens'].quantity), total('completion_tokens'));
    assert.equal(byProduct['Dedicated Inference - Input Tokens'].attributes.endpoint_name, 'chat');
  });

  test('bad calls: an object id, an unknown endpoint, another project, no model', async () => {
    const byId = await infer('/chat/completions', { model: 'ml_123', messages: [{ role: 'user', content: 'x' }] });
    assert.equal(byId.status, 404);
    assert.match(byId.body.error.message, /endpoint string/);
    const unknown = await infer('/chat/completions', {
      model: `${t.projectSlug}/nope`,
      messages: [{ role: 'user', content: 'x' }],
    });
    assert.equal(unknown.status, 404);
    const foreign = await infer(
      '/chat/completions',
      { model: `${t.projectSlug}/chat`, messages: [{ role: 'user', content: 'x' }] },
      stranger.key,
    );
    assert.equal(foreign.status, 404, "another project's key cannot use the endpoint");
    assert.equal((await infer('/chat/completions', { messages: [] })).status, 400);
    assert.equal((await v2('GET', `/endpoints/${endpointId}`, undefined, stranger.key)).status, 404);
  });

  test('a catalog model without weights here fails with a reason', async () => {
    const res = await v2('POST', `/endpoints/${endpointId}/deployments`, {
      name: 'llama',
      modelId: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference',
      autoscaling: { minReplicas: 1 },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.status.state, 'DEPLOYMENT_STATE_FAILED');
    assert.match(res.body.status.message, /No weights for meta-llama/);
    assert.equal((await v2('DELETE', `/endpoints/${endpointId}/deployments/${res.body.id}`)).status, 200);
    const unknown = await v2('POST', `/endpoints/${endpointId}/deployments`, {
      name: 'nothing',
      modelId: 'ml_nothing',
      autoscaling: {},
    });
    assert.equal(unknown.body.error.param, 'modelId');
  });

  test('a deployment being deleted takes no changes (409), but asking it to stop is answered as it is', async () => {
    const res = await v2('POST', `/endpoints/${endpointId}/deployments`, {
      name: 'leaving',
      modelId: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference',
      autoscaling: { minReplicas: 1 },
    });
    assert.equal(res.status, 200);
    // Held in the state a deletion passes through while its replicas stop.
    await p.db.query('UPDATE endpoint_deployments SET deleting = true WHERE id = $1', [res.body.id]);
    // No longer the endpoint's (the CLI's `rm --force` walks this list), still readable by id.
    const listed = (await v2('GET', `/endpoints/${endpointId}`)).body.deployments.map((d: { id: string }) => d.id);
    assert.ok(!listed.includes(res.body.id), `${res.body.id} is not among ${listed.join(', ')}`);
    assert.equal((await v2('GET', `/endpoints/${endpointId}/deployments/${res.body.id}`)).status, 200);
    const renamed = await v2('PATCH', `/endpoints/${endpointId}/deployments/${res.body.id}`, { name: 'staying' });
    assert.equal(renamed.status, 409);
    assert.equal(renamed.body.error.code, 'deployment_deleting');
    // What the Python CLI's `endpoints rm --force` sends before it deletes each deployment.
    const stop = await v2('PATCH', `/endpoints/${endpointId}/deployments/${res.body.id}?updateMask=autoscaling`, {
      autoscaling: { minReplicas: 0, maxReplicas: 0 },
    });
    assert.equal(stop.status, 200, JSON.stringify(stop.body));
    assert.equal(stop.body.name, 'leaving');
    assert.equal((await v2('DELETE', `/endpoints/${endpointId}/deployments/${res.body.id}`)).status, 200);
  });

  test('a deployment is paused with replica bounds 0..0 (STOPPED, no replica) and resumed by raising them', async () => {
    const url = `/endpoints/${endpointId}/deployments/${deploymentId}`;
    // Its container deployment (named after it: dep-<uuid> for dep_<uuid>) is changed only through the endpoints API.
    const container = deploymentId.replace('dep_', 'dep-');
    for (const [method, json] of [
      ['PATCH', { min_replicas: 0 }],
      ['DELETE', undefined],
    ] as const) {
      const direct = await call(p.baseUrl, method, `/v1/deployments/${container}`, { key: t.key, json });
      assert.equal(direct.status, 409, JSON.stringify(direct.body));
      assert.equal(direct.body.error.code, 'deployment_managed_by_endpoint');
    }
    const paused = await v2('PATCH', url, { autoscaling: { minReplicas: 0, maxReplicas: 0 } });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    await eventually(
      () => v2('GET', url).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_STOPPED' && d.status.readyReplicas === 0,
      30_000,
    );
    const resumed = await v2('PATCH', url, { autoscaling: { minReplicas: 1, maxReplicas: 1 } });
    assert.equal(resumed.status, 200);
    await eventually(
      () => v2('GET', url).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
      60_000,
    );
    const answer = await infer('/completions', { model: `${t.projectSlug}/chat`, prompt: 'hi', max_tokens: 2 });
    assert.equal(answer.status, 200);
    // Newest first, as the SDK says: reversed, the order they happened in.
    const types = (await v2('GET', `/endpoints/${endpointId}/events?deploymentIds=${deploymentId}`)).body.data
      .map((e: { type: string }) => e.type)
      .reverse();
    assert.ok(
      types.indexOf('deployment.paused') >= 0 &&
        types.indexOf('deployment.paused') < types.indexOf('deployment.resumed'),
    );
  });

  test('events cover the life of the deployment; delete stops it, then the endpoint can go', async () => {
    const stale = await v2('DELETE', `/endpoints/${endpointId}/deployments/${deploymentId}?etag=stale`);
    assert.equal(stale.status, 409);
    assert.equal((await v2('DELETE', `/endpoints/${endpointId}`)).status, 409, 'it still has a deployment');
    assert.equal((await v2('DELETE', `/endpoints/${endpointId}/deployments/${deploymentId}`)).status, 200);
    await eventually(
      () => v2('GET', `/endpoints/${endpointId}/deployments/${deploymentId}`).then((r) => r.status),
      (s) => s === 404,
      30_000,
    );
    const events = (await v2('GET', `/endpoints/${endpointId}/events`)).body.data;
    const types = events.map((e: { type: string }) => e.type).reverse(); // oldest first
    for (const expected of [
      'endpoint.created',
      'deployment.created',
      'deployment.ready',
      'deployment.failed',
      'deployment.stopping',
      'deployment.deleted',
    ]) {
      assert.ok(types.includes(expected), `${expected} in ${types.join(', ')}`);
    }
    assert.ok(types.indexOf('deployment.created') < types.indexOf('deployment.ready'));
    const onlyOne = (await v2('GET', `/endpoints/${endpointId}/events?deploymentIds=${deploymentId}`)).body.data;
    assert.ok(onlyOne.every((e: { deploymentId: string }) => e.deploymentId === deploymentId));
    assert.equal((await v2('DELETE', `/endpoints/${endpointId}`)).status, 200);
  });
});
