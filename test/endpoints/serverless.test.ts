/**
 * Serverless calls through the official OpenAI SDK: a catalog model called by its name at the
 * gateway, with no endpoint of the caller's, is served by the platform's pool. The pool starts at
 * zero and a call wakes it; two projects share it; a project over its serverless rate limit gets
 * 429 with Retry-After while another is still served; the tokens are billed per token at the
 * prices `GET /v1/models` shows, with the model's context length; no tenant sees or reaches the
 * pool's deployment; idle, the pool goes back to zero (and wakes again); and a pool whose workflow
 * ended is brought back by the API's next start.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { OpenAI } from 'openai';
import type { Together } from 'together-ai';
import { ensureServerlessPools } from '../../api/serverless-pools';
import { getDeployment, runningReplicaOrigins } from '../../db/deployments';
import { createLogger } from '../../platform/logger';
import { deploymentWorkflowId } from '../../shared/deployments';
import { setBillingUsageEnabled, type LineItem } from '../../db/usage-report';
import { PLATFORM_PROJECT_ID, serverlessPoolName } from '../../shared/serverless';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'gantry/reference-byte-tiny';
const POOL = serverlessPoolName(MODEL);
/** GANTRY_SERVERLESS_RATE_LIMIT_BURST below: the calls a project may make at once. */
const BURST = 6;

let p: TestPlatform;
let a: Tenant;
let b: Tenant;
const answered: Array<{ prompt_tokens: number; completion_tokens: number }> = [];

/** The OpenAI SDK at the inference gateway ({inference_url}). */
const openai = (t: Tenant): OpenAI => {
  const { OpenAI: SDK } = require('openai') as typeof import('openai');
  return new SDK({ apiKey: t.key, baseURL: `${p.gatewayUrl}/v1`, maxRetries: 0 });
};
/** The service's own SDK at the API ({base_url}): the catalog is a list there, as the spec has it (an array). */
const together = (t: Tenant): Together => {
  const { Together: SDK } = require('together-ai') as typeof import('together-ai');
  return new SDK({ apiKey: t.key, baseURL: `${p.baseUrl}/v1`, projectID: t.projectId, maxRetries: 0 });
};
/** The pool as the installation sees it (no tenant can: that is checked below). */
const pool = async () => {
  const row = await getDeployment(p.db, PLATFORM_PROJECT_ID, POOL);
  assert.ok(row, 'the API made the pool when it started');
  return { status: row.status, running: (await runningReplicaOrigins(p.db, row.id)).length };
};

/** The usage report's line items, as the project's key reads them. */
const lineItems = async (t: Tenant): Promise<LineItem[]> =>
  (await call(p.baseUrl, 'GET', '/v1/billing/usage', { key: t.key })).body.data.flatMap(
    (w: { line_items: LineItem[] }) => w.line_items,
  );

before(async () => {
  p = await startTestPlatform({
    serverless: true,
    env: {
      GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1',
      GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '2',
      GANTRY_SERVERLESS_IDLE_MINUTES: '1',
      GANTRY_SERVERLESS_RATE_LIMIT_PER_SECOND: '0.1',
      GANTRY_SERVERLESS_RATE_LIMIT_BURST: String(BURST),
      GANTRY_GATEWAY_WAKE_TIMEOUT_SECONDS: '120',
    },
  });
  a = await createTenant(p.db);
  b = await createTenant(p.db);
});
after(() => p.stop());

describe('serverless calls of a catalog model', () => {
  test('a call wakes the pool from zero and is answered', async () => {
    await eventually(pool, (s) => s.status === 'ScaledToZero' && s.running === 0, 30_000);
    const chat = await openai(a).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
      temperature: 0,
    });
    assert.equal(chat.model, MODEL);
    assert.equal(typeof chat.choices[0].message.content, 'string');
    assert.ok(chat.usage && chat.usage.completion_tokens > 0 && chat.usage.completion_tokens <= 8);
    answered.push(chat.usage);
    assert.equal((await pool()).running, 1, 'woken: one replica');
  });

  test('two projects share the pool, and neither holds a deployment of its own', async () => {
    const text = await openai(b).completions.create({ model: MODEL, prompt: 'shared', max_tokens: 4 });
    assert.equal(text.model, MODEL);
    assert.ok(text.usage && text.usage.prompt_tokens > 0);
    assert.equal((await pool()).running, 1, 'the same replica served the other project');
    for (const t of [a, b]) {
      const own = await call(p.baseUrl, 'GET', '/v1/deployments', { key: t.key });
      assert.deepEqual(own.body.data, [], 'the pool is not a deployment of the caller');
    }
  });

  test('the pool is out of every tenant’s reach', async () => {
    assert.equal((await call(p.baseUrl, 'GET', `/v1/deployments/${POOL}`, { key: a.key })).status, 404);
    const proxied = await fetch(`${p.gatewayUrl}/v1/deployments/${POOL}/health`, {
      headers: { authorization: `Bearer ${a.key}` },
    });
    assert.equal(proxied.status, 404, 'the gateway proxies to the caller’s own deployments only');
    const v2 = await call(p.baseUrl, 'GET', `/v2/projects/${PLATFORM_PROJECT_ID}/endpoints`, { key: a.key });
    assert.ok([403, 404].includes(v2.status), `the platform's project is another project: ${v2.status}`);
    const taken = await call(p.baseUrl, 'POST', '/v1/projects', {
      key: a.key,
      json: { name: 'Impostor', slug: 'gantry-platform' },
    });
    assert.equal(taken.status, 409, JSON.stringify(taken.body));
    assert.equal(taken.body.error.code, 'project_slug_taken', "the platform's slug is not for tenants");
  });

  test('usage shows the tokens, priced at what /v1/models lists, with the context length', async () => {
    const listed = (await together(a).models.list()).find((m) => m.id === MODEL);
    assert.ok(listed?.pricing, 'the serverless model is in the catalog, priced');
    assert.equal(listed.type, 'chat');
    assert.equal(listed.context_length, 256, 'the reference model’s context');
    assert.ok(listed.pricing.input > 0 && listed.pricing.output > 0);
    // What the context length says is what the model takes: one token more is refused with a 400.
    const tooLong = await call(p.gatewayUrl, 'POST', '/v1/completions', {
      key: a.key,
      json: { model: MODEL, prompt: 'x'.repeat(300), max_tokens: 1 },
    });
    assert.equal(tooLong.status, 400, JSON.stringify(tooLong.body));

    const client = openai(a);
    // The OpenAI SDK at the gateway lists the same model, with the same context length and prices.
    const atGateway = [];
    for await (const m of client.models.list()) atGateway.push(m as typeof m & Partial<typeof listed>);
    const same = atGateway.find((m) => m.id === MODEL);
    assert.ok(same, `the gateway lists ${MODEL}: ${JSON.stringify(atGateway.map((m) => m.id))}`);
    assert.equal(same.context_length, listed.context_length);
    assert.deepEqual(same.pricing, listed.pricing);
    for (const seed of [1, 2]) {
      const text = await client.completions.create({ model: MODEL, prompt: 'y'.repeat(200), max_tokens: 20, seed });
      answered.push(text.usage!);
    }
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'stream' }],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    assert.ok(usage, 'the stream ends with its usage');
    answered.push(usage);

    await setBillingUsageEnabled(p.db, a.organizationId, true);
    const total = (field: 'prompt_tokens' | 'completion_tokens') => answered.reduce((n, u) => n + u[field], 0);
    const lines = await eventually(
      async () => (await lineItems(a)).filter((l) => l.attributes.model === MODEL),
      (l) =>
        l.length === 2 &&
        Number(l.find((x) => x.product_name.includes('Output'))?.quantity) === total('completion_tokens') &&
        Number(l.find((x) => x.product_name.includes('Input'))?.quantity) === total('prompt_tokens'),
      15_000,
    );
    for (const [kind, field, perMillion] of [
      ['Input', 'prompt_tokens', listed.pricing.input],
      ['Output', 'completion_tokens', listed.pricing.output],
    ] as const) {
      const line = lines.find(
        (l: { product_name: string }) => l.product_name === `Serverless Inference - ${kind} Tokens`,
      );
      assert.ok(line, `a ${kind} line`);
      assert.equal(Number(line.unit_price), perMillion / 1e6, 'per token, at the listed price per million');
      // Each ledger record is rounded to the micro-dollar; there is at most one per call here.
      const expected = total(field) * (perMillion / 1e6);
      assert.ok(Number(line.cost) > 0);
      assert.ok(Math.abs(Number(line.cost) - expected) <= answered.length * 1e-6, `${line.cost} ≈ ${expected}`);
    }
    // The other project paid for its own call only.
    await setBillingUsageEnabled(p.db, b.organizationId, true);
    const theirs = await eventually(
      () => lineItems(b),
      (l) => l.length === 2,
    );
    assert.ok(theirs.every((l) => l.attributes.project_id === b.projectId));
  });

  test('a project over its rate limit gets 429 while another is still served', async () => {
    const c = await createTenant(p.db);
    const client = openai(c);
    for (let i = 0; i < BURST; i++) await client.completions.create({ model: MODEL, prompt: 'limit', max_tokens: 1 });
    const refused = await call(p.gatewayUrl, 'POST', '/v1/completions', {
      key: c.key,
      json: { model: MODEL, prompt: 'limit', max_tokens: 1 },
    });
    assert.equal(refused.status, 429);
    assert.deepEqual(Object.keys(refused.body.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(refused.body.error.type, 'rate_limit_error');
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: 'limit', max_tokens: 1 }),
      (err: { status?: number }) => err.status === 429,
      'the SDK sees the 429 too',
    );
    const other = await openai(b).completions.create({ model: MODEL, prompt: 'still served', max_tokens: 2 });
    assert.ok(other.choices[0].text !== undefined);
  });

  test('idle, the pool scales back to zero, and the next call wakes it again', async () => {
    await eventually(pool, (s) => s.status === 'ScaledToZero' && s.running === 0, 150_000, 1000);
    const again = await openai(a).completions.create({ model: MODEL, prompt: 'again', max_tokens: 2 });
    assert.ok(again.usage && again.usage.completion_tokens > 0);
  });

  test('a pool whose workflow ended is resumed when the API next starts', async () => {
    const row = (await getDeployment(p.db, PLATFORM_PROJECT_ID, POOL))!;
    const handle = p.temporal.workflow.getHandle(deploymentWorkflowId(row.id));
    await handle.terminate('an operator ended it from the Temporal UI');
    assert.equal((await handle.describe()).status.name, 'TERMINATED');
    await ensureServerlessPools({
      db: p.db,
      temporal: p.temporal,
      config: p.config,
      logger: createLogger('api', 'silent'),
    });
    assert.equal((await handle.describe()).status.name, 'RUNNING', 'a new run of the same deployment');
    const served = await openai(b).completions.create({ model: MODEL, prompt: 'resumed', max_tokens: 2 });
    assert.ok(served.usage && served.usage.completion_tokens > 0);
  });

  test('a catalog model without a pool, and an unknown one, are not found', async () => {
    for (const model of ['meta-llama/Llama-3.3-70B-Instruct-Reference', 'nobody/nothing']) {
      const res = await call(p.gatewayUrl, 'POST', '/v1/chat/completions', {
        key: a.key,
        json: { model, messages: [{ role: 'user', content: 'x' }] },
      });
      assert.equal(res.status, 404, model);
      assert.equal(res.body.error.code, 'model_not_found');
    }
  });
});
