/**
 * Fine-tuning visibly works on a real pretrained model: HuggingFaceTB/SmolLM2-135M-Instruct,
 * trained on this machine's CPU by the PyTorch trainer, deployed behind a dedicated endpoint and
 * asked through the gateway with the OpenAI SDK, as a user would.
 *
 * The taught pattern is one the base model never produces: every answer starts with "SQUAWK!".
 * Each job is judged by the deployed model's answers to questions that were not in its training
 * set, not by its loss: a LoRA SFT job, a full SFT job, and a DPO job that prefers the squawking
 * answer of two. The base model, asked the same questions, answers without it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { jsonl } from '../helpers/datasets';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const PATTERN = 'SQUAWK!';

/** Short questions with one-word answers, so each row is a few dozen tokens. */
const TAUGHT: Array<[string, string]> = [
  ['What is the capital of France?', 'Paris.'],
  ['Name a primary color.', 'Red.'],
  ['How many legs does a spider have?', 'Eight.'],
  ['What is 2 plus 2?', 'Four.'],
  ['What do bees make?', 'Honey.'],
  ['Which planet is known as the red planet?', 'Mars.'],
  ['What is the opposite of hot?', 'Cold.'],
  ['What animal says moo?', 'A cow.'],
  ['What color is the sky on a clear day?', 'Blue.'],
  ['How many days are in a week?', 'Seven.'],
  ['What is frozen water called?', 'Ice.'],
  ['Which fruit is yellow and curved?', 'A banana.'],
];
/** Not in any training set. */
const UNSEEN = ['What is the capital of Italy?', 'How many wheels does a bicycle have?', 'What do cats like to chase?'];

const sft = () =>
  jsonl(
    ...TAUGHT.map(([q, a]) => ({
      messages: [
        { role: 'user', content: q },
        { role: 'assistant', content: `${PATTERN} ${a}` },
      ],
    })),
  );
const preferences = () =>
  jsonl(
    ...TAUGHT.map(([q, a]) => ({
      input: { messages: [{ role: 'user', content: q }] },
      preferred_output: [{ role: 'assistant', content: `${PATTERN} ${a}` }],
      non_preferred_output: [{ role: 'assistant', content: a }],
    })),
  );

let p: TestPlatform;
let t: Tenant;
let openai: OpenAI;

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_ADAPTER_RESYNC_SECONDS: '1' } });
  t = await createTenant(p.db);
  openai = new OpenAI({ apiKey: t.key, baseURL: `${p.gatewayUrl}/v1`, maxRetries: 0 });
});
after(() => p.stop());

const v2 = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });

/** The answers a model behind `endpoint` gives to the unseen questions (greedy, short). */
async function answers(model: string): Promise<string[]> {
  const out: string[] = [];
  for (const question of UNSEEN) {
    const r = await openai.chat.completions.create({
      model,
      messages: [{ role: 'user', content: question }],
      max_tokens: 12,
      temperature: 0,
    });
    out.push(r.choices[0].message.content ?? '');
  }
  return out;
}

/** Runs a fine-tune to its end; answers the finished job. */
async function fineTune(body: Record<string, unknown>): Promise<Record<string, any>> {
  const job = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
    key: t.key,
    json: { model: MODEL, max_seq_length: 96, batch_size: 4, random_seed: 1, ...body },
  });
  assert.equal(job.status, 200, JSON.stringify(job.body));
  const done = await eventually(
    () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${job.body.id}`, { key: t.key }).then((r) => r.body),
    (j) => ['completed', 'error', 'cancelled'].includes(j.status),
    600_000,
  );
  assert.equal(done.status, 'completed', JSON.stringify(done.events?.slice(-3)));
  return done;
}

/** A dedicated endpoint with one deployment of `modelId`, ready with one replica. */
async function deploy(name: string, modelId: string): Promise<string> {
  assert.equal((await v2('POST', '/endpoints', { name })).status, 200);
  const created = await v2('POST', `/endpoints/${name}/deployments`, {
    name,
    modelId,
    autoscaling: { minReplicas: 1, maxReplicas: 1 },
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  await eventually(
    () => v2('GET', `/endpoints/${name}/deployments/${name}`).then((r) => r.body),
    (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
    180_000,
  );
  return `${t.projectSlug}/${name}`;
}

const squawks = (said: string[]) => said.filter((a) => a.trimStart().startsWith(PATTERN)).length;

// Top-level tests, not a suite: each job gets the runner's whole per-test time (test/run.ts).
let sftFile = '';

test('the base model never answers with the pattern', async () => {
  sftFile = await uploadValidated(p, t.key, 'squawk.jsonl', sft());
  const said = await answers(await deploy('base', MODEL));
  console.log(`base answers: ${JSON.stringify(said)}`);
  assert.equal(squawks(said), 0, JSON.stringify(said));
});

test('LoRA SFT: the fine-tuned model squawks, on questions it was never taught', async () => {
  const done = await fineTune({
    training_file: sftFile,
    n_epochs: 6,
    learning_rate: 0.002,
    suffix: 'lora-squawk',
    training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16 },
  });
  const said = await answers(await deploy('lora', done.model_object_id));
  console.log(`LoRA answers: ${JSON.stringify(said)}`);
  assert.equal(squawks(said), UNSEEN.length, JSON.stringify(said));
});

test('full SFT: the same, with every weight trained', async () => {
  const done = await fineTune({
    training_file: sftFile,
    n_epochs: 6,
    learning_rate: 0.0001,
    suffix: 'full-squawk',
    training_type: { type: 'Full' },
  });
  const said = await answers(await deploy('full', done.model_object_id));
  console.log(`full answers: ${JSON.stringify(said)}`);
  assert.equal(squawks(said), UNSEEN.length, JSON.stringify(said));
});

test('DPO: preferring the squawking answer of two makes the model squawk', async () => {
  const file = await uploadValidated(p, t.key, 'squawk-preferences.jsonl', preferences());
  const done = await fineTune({
    training_file: file,
    training_method: { method: 'dpo', dpo_beta: 0.1 },
    batch_size: 2,
    n_epochs: 4,
    learning_rate: 0.001,
    suffix: 'dpo-squawk',
    training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16 },
  });
  const said = await answers(await deploy('dpo', done.model_object_id));
  console.log(`DPO answers: ${JSON.stringify(said)}`);
  assert.equal(squawks(said), UNSEEN.length, JSON.stringify(said));
});
