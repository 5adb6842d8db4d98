/** Tokenization for fine-tuning: masks by format and train_on_inputs, truncation, packing, DPO pairs. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../../platform/config';
import { ByteTokenizer, hfTokenizer } from '../../fine-tunes/tokenizer';
import { encodeSample, segmentsOf, tokenizePreference, tokenizeSft, trainedSpans } from '../../fine-tunes/tokenize';
import { runTrainer } from '../../providers/trainer/process-trainer';
import { chat } from '../helpers/datasets';

const tokenizer = new ByteTokenizer();
const decode = (ids: number[]) => Buffer.from(ids.filter((i) => i >= 4).map((i) => i - 4)).toString('utf8');
/** The text of the trained positions (the specials dropped). */
const trainedText = (ids: number[], mask: number[]) => decode(ids.filter((_, i) => mask[i]));

describe('byte-level tokenizer', () => {
  test('every UTF-8 byte is one token, and text round-trips', () => {
    const text = 'Grüße, 世界!';
    const ids = tokenizer.encode(text);
    assert.equal(ids.length, Buffer.byteLength(text));
    assert.equal(decode(ids), text);
    assert.deepEqual(
      tokenizer
        .encode('Hiü')
        .slice(0, 3)
        .map((id) => tokenizer.tokenString(id)),
      ['H', 'i', '<0xC3>'],
    );
    assert.equal(tokenizer.tokenString(tokenizer.eos), '</s>');
  });
});

describe('masks follow train_on_inputs', () => {
  const opts = (format: any, trainOnInputs: any) => ({ tokenizer, format, maxSeqLength: 1024, trainOnInputs });

  test('auto: text datasets train everything', () => {
    const { ids, mask } = encodeSample(
      segmentsOf({ text: 'hello world' }, 'GENERAL', tokenizer.chat),
      opts('GENERAL', 'auto'),
    );
    assert.equal(trainedText(ids, mask), 'hello world');
    assert.equal(mask[0], 0, 'BOS is never trained');
    assert.equal(mask.at(-1), 1, 'EOS is trained');
  });

  test('auto: prompt + completion trains the completion only', () => {
    const { ids, mask } = encodeSample(
      segmentsOf({ prompt: 'Q?', completion: ' A.' }, 'INSTRUCTION', tokenizer.chat),
      opts('INSTRUCTION', 'auto'),
    );
    assert.equal(trainedText(ids, mask), ' A.');
  });

  test('auto: conversations train assistant turns, and a weight-0 turn is skipped', () => {
    const record = {
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello', weight: 0 },
        { role: 'user', content: 'bye' },
        { role: 'assistant', content: 'goodbye', reasoning: 'polite' },
      ],
    };
    const { ids, mask } = encodeSample(
      segmentsOf(record, 'CONVERSATION', tokenizer.chat),
      opts('CONVERSATION', 'auto'),
    );
    assert.equal(trainedText(ids, mask), 'assistant: <think>polite</think>goodbye\n');
    assert.match(decode(ids), /^system: Be brief\.\nuser: hi\nassistant: hello\nuser: bye\n/);
  });

  test('true trains inputs too; false trains outputs only', () => {
    const seg = segmentsOf({ prompt: 'Q?', completion: ' A.' }, 'INSTRUCTION', tokenizer.chat);
    const all = encodeSample(seg, opts('INSTRUCTION', true));
    assert.equal(trainedText(all.ids, all.mask), 'Q? A.');
    const outputs = encodeSample(segmentsOf({ text: 'abc' }, 'GENERAL', tokenizer.chat), opts('GENERAL', false));
    assert.equal(trainedText(outputs.ids, outputs.mask), '', 'a text dataset has no outputs: only EOS is trained');
  });

  test('trained spans are half-open ranges', () => {
    assert.deepEqual(trainedSpans([0, 1, 1, 0, 0, 1]), [
      [1, 3],
      [5, 6],
    ]);
  });
});

describe('rows', () => {
  const records = Array.from({ length: 10 }, (_, i) => ({ prompt: `question ${i}?`, completion: ` answer ${i}.` }));
  const base = { tokenizer, format: 'INSTRUCTION' as const, trainOnInputs: 'auto' as const };

  test('no packing: one row per sample, cut at max_seq_length and counted as truncated', () => {
    const r = tokenizeSft(records, { ...base, maxSeqLength: 16, packing: false });
    assert.equal(r.rows.length, 10);
    assert.ok(r.rows.every((row) => row.input_ids.length <= 16 && row.input_ids.length === row.loss_mask.length));
    assert.equal(r.truncated, 10);
    const roomy = tokenizeSft(records, { ...base, maxSeqLength: 64, packing: false });
    assert.equal(roomy.truncated, 0);
  });

  test('packing: samples fill rows of exactly max_seq_length; no token is lost', () => {
    const unpacked = tokenizeSft(records, { ...base, maxSeqLength: 64, packing: false });
    const packed = tokenizeSft(records, { ...base, maxSeqLength: 32, packing: true });
    assert.ok(packed.rows.slice(0, -1).every((row) => row.input_ids.length === 32));
    assert.deepEqual(
      packed.rows.flatMap((row) => row.input_ids),
      unpacked.rows.flatMap((row) => row.input_ids),
    );
    assert.equal(packed.trainedTokens, unpacked.trainedTokens);
  });

  test('a DPO pair masks the prompt and trains each answer', () => {
    const { row, truncated } = tokenizePreference(
      {
        input: { messages: [{ role: 'user', content: 'Say 7' }] },
        preferred_output: [{ role: 'assistant', content: '7' }],
        non_preferred_output: [{ role: 'assistant', content: 'no' }],
      },
      { tokenizer, format: 'PREFERENCE_OPENAI', maxSeqLength: 128, trainOnInputs: 'auto' },
    );
    assert.equal(truncated, false);
    assert.equal(trainedText(row.chosen_ids, row.chosen_mask), 'assistant: 7\n');
    assert.equal(trainedText(row.rejected_ids, row.rejected_mask), 'assistant: no\n');
    assert.equal(decode(row.chosen_ids), 'user: Say 7\nassistant: 7\n');
  });
});

describe('tokenized rows train the reference model', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-tok-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  test('a conversational dataset, tokenized and packed, makes the loss fall', async () => {
    const records = Array.from({ length: 60 }, (_, i) => chat(`What is ${i} + 2?`, `${i} + 2 = ${i + 2}.`));
    const { rows } = tokenizeSft(records, {
      tokenizer,
      format: 'CONVERSATION',
      trainOnInputs: 'auto',
      maxSeqLength: 64,
      packing: true,
    });
    const file = path.join(work, 'train.jsonl');
    writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const run = await runTrainer({
      python: loadConfig().trainerPython,
      config: {
        model: { vocab_size: tokenizer.vocabSize, d_model: 64, n_layers: 2, n_heads: 4, d_ff: 128, max_seq_len: 64 },
        base_seed: 0,
        training_method: 'sft',
        training_type: 'full',
        learning_rate: 0.003,
        lr_scheduler: { type: 'linear', min_lr_ratio: 0 },
        n_epochs: 6,
        batch_size: 8,
        max_seq_length: 64,
        n_checkpoints: 1,
        seed: 1,
        train_file: file,
        output_dir: path.join(work, 'out'),
      },
    });
    assert.equal(run.exitCode, 0, run.stderr);
    const losses = run.events.flatMap((e) => (e.event === 'step' ? [e.loss ?? NaN] : []));
    assert.ok(losses.at(-1)! < losses[0] - 1, `loss ${losses[0].toFixed(2)} -> ${losses.at(-1)!.toFixed(2)}`);
  });
});

describe('real families use their published tokenizers and chat templates', () => {
  const conversation = {
    messages: [
      { role: 'user', content: 'Hello' },
      { role: 'assistant', content: 'Hi there' },
    ],
  };

  test('Llama 3.1: BOS, header tokens untrained, the assistant body and <|eot_id|> trained', () => {
    const llama = hfTokenizer('llama3.1');
    // Ids from Llama 3's published vocabulary (tokenizer.json), not from Gantry's code.
    assert.deepEqual(llama.encode('Hello world'), [9906, 1917]);
    assert.equal(llama.bos, 128000);
    assert.equal(llama.vocabSize, 128256);
    const opts = {
      tokenizer: llama,
      format: 'CONVERSATION' as const,
      maxSeqLength: 1024,
      trainOnInputs: 'auto' as const,
    };
    const { ids, mask } = encodeSample(segmentsOf(conversation, 'CONVERSATION', llama.chat), opts);
    assert.equal(ids[0], 128000);
    const tokens = ids.map((id) => llama.tokenString(id));
    assert.deepEqual(tokens.slice(1, 4), ['<|start_header_id|>', 'user', '<|end_header_id|>']);
    const trained = tokens.filter((_, i) => mask[i]);
    // As apply_chat_template renders it: the turn's own <|eot_id|> (the EOS) ends it, no second one.
    assert.deepEqual(trained, ['Hi', 'Ġthere', '<|eot_id|>'], 'the body and its end of turn');
  });

  test('Qwen3: no BOS; <|im_start|> headers; counts differ from Llama on the same text', () => {
    const qwen = hfTokenizer('qwen3');
    assert.equal(qwen.bos, null);
    const opts = {
      tokenizer: qwen,
      format: 'CONVERSATION' as const,
      maxSeqLength: 1024,
      trainOnInputs: 'auto' as const,
    };
    const { ids } = encodeSample(segmentsOf(conversation, 'CONVERSATION', qwen.chat), opts);
    assert.equal(qwen.tokenString(ids[0]), '<|im_start|>');
    // The template's end of the last turn is the end of the sample: `<|im_end|>\n`, no EOS after it.
    assert.deepEqual(
      ids.slice(-2).map((id) => qwen.tokenString(id)),
      ['<|im_end|>', 'Ċ'],
    );
    const text = 'Tokenizers split “naïve” text differently: 東京 2026.';
    assert.notDeepEqual(qwen.encode(text), hfTokenizer('llama3.1').encode(text));
  });
});
