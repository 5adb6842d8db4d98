/**
 * Tokenization throughput: what the fine-tuning tokenization activity does with a stored dataset
 * (fine-tunes/tokenize-file.ts: read the JSONL from the blob store, template, tokenize, mask, pack,
 * write the trainer's rows back as JSON lines), against calling the same tokenizer directly on
 * the same texts already in memory, in interleaved rounds (bench/lib/rounds.ts). Judged: the
 * bare tokenizer's time over the activity's.
 *
 * The tokenizer is a base model's own (default: Llama 3.1's published BPE tokenizer, as a Llama
 * job uses; the byte-level reference tokenizer is so cheap that any per-row work dominates it).
 *
 *   npx tsx bench/tokenization.ts [records, default 50000] [base model]
 */
import { createReadStream, createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { findFineTuneModel } from '../fine-tunes/models';
import { segmentsOf } from '../fine-tunes/tokenize';
import { tokenizeStoredFile } from '../fine-tunes/tokenize-file';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import { runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';

function record(i: number) {
  return {
    messages: [
      { role: 'system', content: 'You are a careful assistant who shows its working.' },
      { role: 'user', content: `Question ${i}: what is ${i} plus ${i * 7}? Explain step by step.` },
      { role: 'assistant', content: `Start from ${i}, add ${i * 7}, and the sum is ${i * 8}.` },
    ],
  };
}

async function main() {
  const n = Number(process.argv[2] ?? 50_000);
  const modelName = process.argv[3] ?? 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference';
  const model = findFineTuneModel(modelName);
  if (!model) throw new Error(`unknown base model ${modelName}`);
  const tokenizer = model.tokenizer();
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-bench-tokenize-'));
  try {
    const blobs = new FilesystemBlobStore(path.join(work, 'blobs'));
    // The dataset as an upload stores it.
    const source = 'files/bench/train.jsonl';
    const staging = path.join(work, 'train.jsonl');
    const out = createWriteStream(staging);
    for (let i = 0; i < n; i++) out.write(JSON.stringify(record(i)) + '\n');
    out.end();
    await finished(out);
    await blobs.put(source, createReadStream(staging), { maxBytes: Number.MAX_SAFE_INTEGER });
    // The texts as the template renders them: the reference gets exactly the same strings.
    const texts = Array.from({ length: n }, (_, i) => record(i)).flatMap((r) =>
      segmentsOf(r, 'CONVERSATION', tokenizer.chat).map((s) => s.text),
    );
    let round = 0;
    await compareInRounds({
      bench: 'tokenization',
      reference: async () => {
        const t0 = performance.now();
        let tokens = 0;
        for (const t of texts) tokens += tokenizer.encode(t).length;
        return { seconds: (performance.now() - t0) / 1000, tokens };
      },
      gantry: async () => {
        const t0 = performance.now();
        const r = await tokenizeStoredFile(blobs, source, `fine-tunes/bench/tokenized/train-${round++}.jsonl`, {
          tokenizer,
          format: 'CONVERSATION',
          method: 'sft',
          maxSeqLength: Math.min(2048, model.limits.max_seq_length_sft),
          trainOnInputs: 'auto',
          packing: true,
        });
        // Its token count adds the template's special tokens; the texts tokenized are the same.
        return { seconds: (performance.now() - t0) / 1000, tokens: r.tokens, rows: r.rows };
      },
      checks: [
        {
          name: 'speed on the same texts, bare tokenizer time / activity time',
          value: (r, g) => r.seconds / g.seconds,
          atLeast: 0.8,
        },
      ],
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

runBench(main);
