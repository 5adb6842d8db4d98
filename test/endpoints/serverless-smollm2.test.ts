/**
 * The real catalog model served serverless: `HuggingFaceTB/SmolLM2-135M-Instruct` called by name
 * through the OpenAI SDK at the gateway, with no endpoint of the caller's, answers a question as
 * the pretrained instruct model does, from the platform's pool (woken from zero by the call), and
 * the catalog lists it with its 8192-token context and serverless pricing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { OpenAI } from 'openai';
import type { Together } from 'together-ai';
import { startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  // Loading the model on two busy cores takes a while: the call waits for the pool's replica.
  p = await startTestPlatform({
    serverless: true,
    env: { GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1', GANTRY_GATEWAY_WAKE_TIMEOUT_SECONDS: '300' },
  });
  t = await createTenant(p.db);
});
after(() => p.stop());

describe('serverless SmolLM2', () => {
  test('the catalog lists it with its context length and pricing', async () => {
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    const client: Together = new SDK({ apiKey: t.key, baseURL: `${p.baseUrl}/v1`, projectID: t.projectId });
    const listed = (await client.models.list()).find((m) => m.id === MODEL);
    assert.ok(listed, `${MODEL} is served serverless here`);
    assert.equal(listed.context_length, 8192, 'its config.json: max_position_embeddings');
    assert.ok(listed.pricing && listed.pricing.input > 0 && listed.pricing.output > 0);
  });

  test('a chat completion by the model’s name answers sensibly, with usage', async () => {
    const { OpenAI: SDK } = require('openai') as typeof import('openai');
    const client: OpenAI = new SDK({ apiKey: t.key, baseURL: `${p.gatewayUrl}/v1`, maxRetries: 0 });
    const chat = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'What is the capital of France? Answer in one word.' }],
      max_tokens: 12,
      temperature: 0,
    });
    assert.equal(chat.model, MODEL);
    assert.match(chat.choices[0].message.content ?? '', /paris/i);
    assert.ok(chat.usage && chat.usage.prompt_tokens > 10 && chat.usage.completion_tokens <= 12);
  });
});
