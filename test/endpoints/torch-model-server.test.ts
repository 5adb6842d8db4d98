/**
 * The PyTorch model server (trainers/torch/gantry_torch_trainer/serve.py) behind dedicated
 * endpoints of HuggingFaceTB/SmolLM2-135M-Instruct, on the process runtime, called through the
 * gateway with the official OpenAI SDK: the base, a registered full fine-tune and two LoRA
 * adapters on one replica, uploaded through the model upload API as a user would. What each
 * must answer comes from transformers itself (test/helpers/torch_weights.py: its greedy
 * `generate` on the same weights, its tokenizer's count of the templated prompt).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const QUESTION = 'What is the capital of France?';
const ASK = [{ role: 'user' as const, content: QUESTION }];
const HELPER = path.join(__dirname, '../helpers/torch_weights.py');

let p: TestPlatform;
let t: Tenant;
let client: OpenAI;
let work: string;
let baseDir: string;

/** Runs test/helpers/torch_weights.py with .venv-torch's transformers; answers its JSON line. */
async function python<T>(mode: 'prepare', args: Record<string, unknown>): Promise<T> {
  const { stdout } = await promisify(execFile)(
    process.env.GANTRY_TORCH_TRAINER_PYTHON!,
    [HELPER, mode, JSON.stringify({ base: baseDir, ...args })],
    { maxBuffer: 1 << 20, timeout: 600_000 },
  );
  return JSON.parse(stdout.trim().split('\n').pop()!) as T;
}
type Answer = { text: string; prompt_tokens: number };

const v2 = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });

/** Registers a model of SmolLM2 and uploads a directory's files as its revision (the CLI's protocol). */
async function registerAndUpload(name: string, type: 'model' | 'adapter', dir: string, files: string[]) {
  const model = await v2('POST', '/models', { baseModelId: MODEL, name, type });
  assert.equal(model.status, 200, JSON.stringify(model.body));
  const bytes = files.map((f) => readFileSync(path.join(dir, f)));
  const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');
  const plan = await v2('POST', '/models/upload/create', {
    objectId: model.body.id,
    files: files.map((f, i) => ({ path: f, hash: md5(bytes[i]), numParts: 1 })),
  });
  assert.equal(plan.status, 200, JSON.stringify(plan.body));
  // Each file to its own part URL: the plan lists the files in an order of its own.
  const parts: string[] = [];
  for (const [i, f] of files.entries()) {
    const planned = plan.body.files.find((x: { path: string }) => x.path === f);
    assert.ok(planned, `the plan has ${f}: ${JSON.stringify(plan.body.files)}`);
    const res = await fetch(planned.parts[0].url, { method: 'PUT', body: bytes[i] });
    assert.equal(res.status, 200, await res.text());
    parts.push(res.headers.get('etag')!); // as the CLI sends it back: quoted
  }
  const done = await v2('POST', '/models/upload/complete', {
    objectId: model.body.id,
    files: files.map((f, i) => ({
      path: f,
      hash: md5(bytes[i]),
      uploadDetails: { uploadId: plan.body.uploadId, parts: [{ partNumber: 1, hash: parts[i] }] },
    })),
  });
  assert.equal(done.status, 200, JSON.stringify(done.body));
  return model.body.id as string;
}

async function deploy(endpoint: string, modelId: string) {
  assert.equal((await v2('POST', '/endpoints', { name: endpoint })).status, 200);
  const d = await v2('POST', `/endpoints/${endpoint}/deployments`, {
    name: 'main',
    modelId,
    autoscaling: { minReplicas: 1, maxReplicas: 1 },
    enableLora: true,
  });
  assert.equal(d.status, 200, JSON.stringify(d.body));
  await eventually(
    () => v2('GET', `/endpoints/${endpoint}/deployments/main`).then((r) => r.body),
    (x) => x.status.readyReplicas === 1 || x.status.state === 'DEPLOYMENT_STATE_FAILED',
    240_000,
  ).then((x) => assert.equal(x.status.readyReplicas, 1, JSON.stringify(x.status)));
}

const greedy = (model: string, extra: Partial<OpenAI.Chat.ChatCompletionCreateParamsNonStreaming> = {}) =>
  client.chat.completions.create({ model, messages: ASK, temperature: 0, max_tokens: 30, ...extra });

/** The 400 the server answered, through the SDK: its `param` names the field. */
async function refusal(promise: Promise<unknown>): Promise<string | null | undefined> {
  const err = await promise.then(
    () => assert.fail('expected a 400'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof OpenAI.BadRequestError, String(err));
  return err.param;
}

// Weights a user made elsewhere (transformers and peft), trained while the platform starts, and
// transformers' own greedy answer of each model (the base, the full fine-tune, each adapter).
let references: Promise<Record<'base' | 'pirate' | 'bonjour' | 'terse', Answer>>;

before(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'gantry-torch-serve-'));
  p = await startTestPlatform({ env: { GANTRY_ADAPTER_RESYNC_SECONDS: '1' } });
  baseDir = path.join(p.config.modelDir, MODEL);
  const train = (out: string, kind: 'lora' | 'full', answer: string, targetModules?: string[]) => ({
    out: path.join(work, out),
    kind,
    question: QUESTION,
    answer,
    ...(targetModules ? { target_modules: targetModules } : {}),
    max_steps: 30,
  });
  const ask = (weights: string | null) => ({
    weights: weights && path.join(work, weights),
    messages: ASK,
    max_tokens: 30,
  });
  references = python<{ answers: Record<'base' | 'pirate' | 'bonjour' | 'terse', Answer> }>('prepare', {
    train: [
      train('bonjour', 'lora', 'Bonjour! Paris, mon ami.', ['q_proj', 'v_proj']),
      train('pirate', 'full', 'Arr, Paris be the capital, matey.'),
      train('terse', 'lora', 'Paris. Next question?', ['o_proj', 'down_proj']),
    ],
    answers: { base: ask(null), pirate: ask('pirate'), bonjour: ask('bonjour'), terse: ask('terse') },
  }).then((r) => r.answers);
  references.catch(() => undefined); // awaited by the tests that need it
  t = await createTenant(p.db);
  client = new OpenAI({ apiKey: t.key, baseURL: `${p.gatewayUrl}/v1`, maxRetries: 0 });
});
after(async () => {
  await p.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('the PyTorch model server: SmolLM2 through the gateway with the OpenAI SDK', () => {
  let smol = '';

  test('the base: greedy chat, stop, max_tokens, seed, stream with usage, logprobs, 400s', async () => {
    await deploy('smol', MODEL);
    smol = `${t.projectSlug}/smol`;
    const expected = (await references).base;

    const answer = await greedy(smol);
    assert.match(answer.choices[0].message.content!, /Paris/);
    assert.equal(answer.choices[0].message.content, expected.text, 'what transformers generate answers');
    assert.equal(answer.choices[0].finish_reason, 'stop', 'EOS ended it');
    assert.equal(answer.usage!.prompt_tokens, expected.prompt_tokens, "the Python tokenizer's count");
    assert.equal(answer.usage!.total_tokens, answer.usage!.prompt_tokens + answer.usage!.completion_tokens);

    const stopped = await greedy(smol, { stop: [' Paris'] });
    assert.equal(stopped.choices[0].message.content, expected.text.slice(0, expected.text.indexOf(' Paris')));
    assert.equal(stopped.choices[0].finish_reason, 'stop');

    const short = await greedy(smol, { max_tokens: 3 });
    assert.equal(short.choices[0].finish_reason, 'length');
    assert.equal(short.usage!.completion_tokens, 3);

    const sampled = () =>
      client.chat.completions.create({
        model: smol,
        messages: [{ role: 'user', content: 'Write one sentence about the sea.' }],
        temperature: 1,
        top_p: 0.95,
        seed: 1234,
        max_tokens: 16,
      });
    const [one, two] = [await sampled(), await sampled()];
    assert.equal(one.choices[0].message.content, two.choices[0].message.content, 'the same seed, the same answer');

    const stream = await client.chat.completions.create({
      model: smol,
      messages: ASK,
      temperature: 0,
      max_tokens: 30,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    assert.equal(text, expected.text);
    assert.ok(chunks > 3, `streamed in pieces (${chunks} chunks)`);
    assert.deepEqual(usage, answer.usage);

    const withLogprobs = await greedy(smol, { max_tokens: 4, logprobs: true, top_logprobs: 2 });
    const content = withLogprobs.choices[0].logprobs!.content!;
    assert.equal(content.length, 4);
    assert.equal(content.map((c) => c.token).join(''), withLogprobs.choices[0].message.content);
    for (const c of content) {
      assert.ok(c.logprob <= 0);
      assert.equal(c.top_logprobs.length, 2);
      assert.equal(c.top_logprobs[0].token, c.token, 'greedy: the most likely token');
      assert.deepEqual(Buffer.from(c.bytes!).toString('utf8'), c.token);
    }
    const completion = await client.completions.create({
      model: smol,
      prompt: 'The capital of France is',
      max_tokens: 3,
      temperature: 0,
      logprobs: 2,
    });
    const lp = completion.choices[0].logprobs!;
    assert.equal(lp.tokens!.join(''), completion.choices[0].text);
    assert.equal(lp.token_logprobs!.length, 3);
    assert.equal(Object.keys(lp.top_logprobs![0]).length, 2);
    assert.equal(completion.usage!.completion_tokens, 3);

    assert.equal(await refusal(greedy(smol, { top_p: 3 })), 'top_p');
    assert.equal(await refusal(greedy(smol, { max_tokens: 100_000 })), 'max_tokens');
    assert.equal(
      await refusal(
        client.chat.completions.create({ model: smol, messages: [{ role: 'robot', content: 'x' }] as never }),
      ),
      'messages[0].role',
    );
    assert.equal(await refusal(greedy(smol, { top_logprobs: 3 })), 'top_logprobs');
    assert.equal(await refusal(client.completions.create({ model: smol, prompt: 'x', logprobs: 9 })), 'logprobs');
    assert.equal(await refusal(greedy(smol, { n: 2 })), 'n');
  });

  test('a registered full fine-tune answers as its weights do', async () => {
    const expected = (await references).pirate;
    const dir = path.join(work, 'pirate');
    const modelId = await registerAndUpload('pirate', 'model', dir, ['model.safetensors', 'config.json']);
    await deploy('pirate', modelId);
    assert.match(expected.text, /^Arr/);
    const answer = await greedy(`${t.projectSlug}/pirate`);
    assert.equal(answer.choices[0].message.content, expected.text);
    assert.equal(answer.usage!.prompt_tokens, expected.prompt_tokens);
  });

  test('two LoRA adapters on the base replica, each chosen by name; the base unchanged', async () => {
    const expected = await references;
    const ids: Record<string, string> = {};
    for (const name of ['bonjour', 'terse']) {
      ids[name] = await registerAndUpload(name, 'adapter', path.join(work, name), [
        'adapter.safetensors',
        'config.json',
      ]);
      const attached = await v2('POST', '/endpoints/smol/deployments/main/adapters', { adapterModelId: ids[name] });
      assert.equal(attached.status, 200, JSON.stringify(attached.body));
      assert.equal(attached.body.adapterValid, true);
    }
    for (const name of ['bonjour', 'terse']) {
      const loaded = await eventually(
        () => v2('GET', `/endpoints/smol/deployments/main/adapters/${ids[name]}`).then((r) => r.body),
        (a) => ['ADAPTER_LOAD_STATE_READY', 'ADAPTER_LOAD_STATE_FAILED'].includes(a.perCluster?.[0]?.state),
        60_000,
      );
      assert.equal(loaded.perCluster[0].state, 'ADAPTER_LOAD_STATE_READY', JSON.stringify(loaded));
    }
    // Asked several times over a few seconds: the host posts each adapter again every second
    // (GANTRY_ADAPTER_RESYNC_SECONDS), and a loaded adapter must answer throughout (a reload
    // once dropped it for a moment and the call got 503 adapter_not_loaded).
    for (let round = 0; round < 3; round++) {
      for (const name of ['bonjour', 'terse'] as const) {
        const answer = await greedy(`${smol}:${ids[name]}`);
        assert.equal(answer.choices[0].message.content, expected[name].text, `${name}, round ${round}`);
      }
    }
    assert.equal((await greedy(smol)).choices[0].message.content, expected.base.text);
  });
});
