/**
 * SmolLM2's token counts come from its own tokenizer: Gantry's ids equal the Python tokenizer's
 * (transformers' AutoTokenizer on the installed model directory, offline) on a corpus of varied
 * text, and its rendered conversations equal `apply_chat_template`, with and without a system
 * message. A user sees the same counts: a job's estimate and its token count, its price, and where
 * max_seq_length cuts. The catalog lists the model with its real context length, and its LoRA target
 * modules are Linear layers of the loaded model.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../platform/config';
import { hfTokenizer } from '../../fine-tunes/tokenizer';
import { encodeSample, segmentsOf } from '../../fine-tunes/tokenize';
import { jsonl } from '../helpers/datasets';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';

const TEXTS = [
  'Hello, world!',
  '  leading and trailing spaces   ',
  'tabs\tand\nnewlines\n\n\n\nmany',
  '\r\n windows \r\n line ends',
  '日本語のテキストと中文文本，还有한국어.',
  'emoji 😀👍🏽 👨‍👩‍👧‍👦 flags 🇫🇷',
  'numbers 1234567890 3.14159 -42 1e-10 0x1F 1,000,000',
  'def f(x):\n    return x ** 2  # square\n\tif x: pass',
  '<|im_start|>user\nlooks like a turn<|im_end|>',
  '<|endoftext|> and <|im_start|> mid-text <|im_end|>x <|im_start|',
  '<think>reasoning</think> <s></s><pad><unk>[INST]',
  'Ünïcödé çàfé naïve façade Ωmega ß العربية עברית हिन्दी 𝔘𝔫𝔦 𝟘𝟙𝟚',
  '\u0000 null, \u00a0 nbsp, \u200b zero-width',
  'a       b\n\n\n   \n  c',
  '   ',
  '\n',
  "It's don't we'll I'M YOU'RE",
  '{"json": [1, 2, {"k": null}]}',
];

type Message = { role: string; content: string };
const CONVERSATIONS: Message[][] = [
  [
    { role: 'user', content: 'What is 2+2?' },
    { role: 'assistant', content: '4.' },
  ],
  [
    { role: 'system', content: 'You are terse.' },
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Hello.' },
  ],
  [
    { role: 'user', content: '\n\nleading newlines' },
    { role: 'assistant', content: '  spaced answer\n\n' },
  ],
  [
    { role: 'user', content: '日本語 😀 1,000' },
    { role: 'assistant', content: '<|im_start|>x<|im_end|>' },
    { role: 'user', content: 'again, with a long enough question to pass thirty-two tokens on its own, surely' },
    { role: 'assistant', content: 'def ok():\n    return True' },
  ],
];

interface PythonView {
  texts: number[][];
  /** Each text as a training sample: the text, then the EOS token. */
  textSamples: number[];
  conversations: number[][];
  linearNames: string[];
  maxPositions: number;
  vocabSize: number;
}

/** The model's own Python tokenizer and the loaded model, from the installed directory, offline. */
function pythonView(): Promise<PythonView> {
  const dir = path.join(loadConfig().modelDir, MODEL);
  const script = `
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
data = json.load(sys.stdin)
tok = AutoTokenizer.from_pretrained(data["dir"])
model = AutoModelForCausalLM.from_pretrained(data["dir"])
print(json.dumps({
    "texts": [tok.encode(t, add_special_tokens=False) for t in data["texts"]],
    "textSamples": [len(tok.encode(t + tok.eos_token, add_special_tokens=False)) for t in data["texts"]],
    "conversations": [list(tok.apply_chat_template(c, tokenize=True)["input_ids"]) for c in data["conversations"]],
    "linearNames": sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}),
    "maxPositions": model.config.max_position_embeddings,
    "vocabSize": len(tok),
}))
`;
  const python = loadConfig().torchTrainerPython;
  assert.ok(python, 'GANTRY_TORCH_TRAINER_PYTHON (./dev exports it)');
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-c', script], {
      env: { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', TRANSFORMERS_VERBOSITY: 'error' },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    child.once('error', reject);
    child.once('close', (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`python exited ${code}: ${err.slice(-3000)}`)),
    );
    child.stdin.end(JSON.stringify({ dir, texts: TEXTS, conversations: CONVERSATIONS }));
  });
}

let py: PythonView;
before(async () => {
  py = await pythonView();
});

describe("Gantry's tokenizer and template against the Python tokenizer", () => {
  test('every text of the corpus: the same ids', () => {
    const smol = hfTokenizer('smollm2');
    TEXTS.forEach((text, i) => assert.deepEqual(smol.encode(text), py.texts[i], JSON.stringify(text)));
    assert.equal(smol.vocabSize, py.vocabSize);
  });

  test('conversations, with and without a system message: the ids apply_chat_template gives', () => {
    const smol = hfTokenizer('smollm2');
    CONVERSATIONS.forEach((messages, i) => {
      const { ids } = encodeSample(segmentsOf({ messages }, 'CONVERSATION', smol.chat), {
        tokenizer: smol,
        format: 'CONVERSATION',
        maxSeqLength: 1 << 20,
        trainOnInputs: 'auto',
      });
      assert.deepEqual(ids, py.conversations[i], JSON.stringify(messages));
    });
  });
});

describe('what a user sees', () => {
  let p: TestPlatform;
  let t: Tenant;
  let chatFile: string;
  let textFile: string;
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  const chatCounts = () => py.conversations.map((ids) => ids.length);

  before(async () => {
    p = await startTestPlatform();
    t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
    chatFile = await uploadValidated(p, t.key, 'chat.jsonl', jsonl(...CONVERSATIONS.map((messages) => ({ messages }))));
    textFile = await uploadValidated(p, t.key, 'text.jsonl', jsonl(...TEXTS.map((text) => ({ text }))));
  });
  after(() => p.stop());

  const estimate = (json: object) =>
    call(p.baseUrl, 'POST', '/v1/fine-tunes/estimate-price', { key: t.key, json: { model: MODEL, ...json } });

  test('the estimate counts the Python tokens, and prices them at the catalog price', async () => {
    const conv = await estimate({ training_file: chatFile });
    assert.equal(conv.status, 200, JSON.stringify(conv.body));
    assert.equal(conv.body.estimated_train_token_count, sum(chatCounts()));
    const text = await estimate({ training_file: textFile, n_epochs: 2 });
    assert.equal(text.body.estimated_train_token_count, 2 * sum(py.textSamples));
    // $0.48 per million LoRA tokens (the catalog's pricing), rounded to the micro-dollar.
    const dollars = (2 * sum(py.textSamples) * 0.48) / 1e6;
    assert.ok(Math.abs(text.body.estimated_total_price - dollars) <= 1e-6, JSON.stringify(text.body));
  });

  test('max_seq_length cuts each sample where the Python count says', async () => {
    const cut = await estimate({ training_file: chatFile, max_seq_length: 32 });
    assert.equal(cut.status, 200, JSON.stringify(cut.body));
    assert.ok(chatCounts().some((n) => n > 32) && chatCounts().some((n) => n <= 32), 'the corpus straddles 32');
    assert.equal(cut.body.estimated_train_token_count, sum(chatCounts().map((n) => Math.min(n, 32))));

    const preview = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: t.key,
      json: { model: MODEL, training_file: chatFile, top_k: CONVERSATIONS.length },
    });
    assert.equal(preview.status, 200, JSON.stringify(preview.body));
    for (const row of preview.body.rows) {
      assert.deepEqual(row.input_ids, py.conversations[row.row_index - 1]);
      assert.equal(row.truncated, false);
    }
  });

  test("a job's token count and charge are the Python count", async () => {
    const created = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: t.key,
      json: { model: MODEL, training_file: chatFile, max_seq_length: 32, batch_size: 1 },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.id;
    const tokens = sum(chatCounts().map((n) => Math.min(n, 32)));
    const charged = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}`, { key: t.key }),
      (r) => r.body.total_price > 0 || ['error', 'cancelled', 'completed'].includes(r.body.status),
      120_000,
    );
    await call(p.baseUrl, 'POST', `/v1/fine-tunes/${id}/cancel`, { key: t.key });
    assert.equal(charged.body.token_count, tokens, JSON.stringify(charged.body));
    // Nanodollars: tokens x $0.48 per million, one epoch, rounded to the micro-dollar.
    assert.equal(charged.body.total_price, Math.round(tokens * 0.48) * 1000, JSON.stringify(charged.body));
  });

  test('the catalog: the real context length, bounds, and LoRA modules that are Linear layers of the model', async () => {
    const supported = await call(p.baseUrl, 'GET', `/v2/supported-models/${encodeURIComponent(MODEL)}`, {
      key: t.key,
    });
    assert.equal(supported.status, 200, JSON.stringify(supported.body));
    assert.equal(supported.body.contextLength, String(py.maxPositions));
    const limits = await call(
      p.baseUrl,
      'GET',
      `/v1/fine-tunes/models/limits?model_name=${encodeURIComponent(MODEL)}`,
      {
        key: t.key,
      },
    );
    assert.equal(limits.status, 200, JSON.stringify(limits.body));
    assert.equal(limits.body.max_seq_length_sft, py.maxPositions);
    assert.ok(limits.body.max_seq_length_dpo <= py.maxPositions);
    assert.ok(limits.body.lora_training.default_rank <= limits.body.lora_training.max_rank);
    assert.ok(limits.body.full_training, 'full training is offered');
    const modules: string[] = limits.body.lora_training.target_modules;
    for (const m of modules) assert.ok(py.linearNames.includes(m), `${m} is not a Linear layer of the model`);
    // all-linear: every Linear of the decoder; the output head (tied to the embeddings) is not adapted.
    assert.deepEqual(
      [...modules].sort(),
      py.linearNames.filter((n) => n !== 'lm_head'),
    );
  });
});
