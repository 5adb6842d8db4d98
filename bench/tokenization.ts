/**
 * Tokenization throughput: the records -> trainer rows step the fine-tuning
 * tokenization activity runs (template, masks, packing, the JSON lines it
 * writes), against calling the same tokenizer directly on the same texts,
 * measured in the same run. Target ratio: at least 0.8.
 *
 * The tokenizer is a base model's own (default: Llama 3.1's published BPE
 * tokenizer, as a Llama job uses; the byte-level reference tokenizer is so
 * cheap that any per-row work dominates it).
 *
 *   npx tsx bench/tokenization.ts [records, default 50000] [base model]
 */
import { findFineTuneModel } from '../finetune/models';
import { segmentsOf, tokenizeSft } from '../finetune/tokenize';

function records(n: number) {
  return Array.from({ length: n }, (_, i) => ({
    messages: [
      { role: 'system', content: 'You are a careful assistant who shows its working.' },
      { role: 'user', content: `Question ${i}: what is ${i} plus ${i * 7}? Explain step by step.` },
      { role: 'assistant', content: `Start from ${i}, add ${i * 7}, and the sum is ${i * 8}.` },
    ],
  }));
}

function time(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return (performance.now() - t0) / 1000;
}

const n = Number(process.argv[2] ?? 50_000);
const modelName = process.argv[3] ?? 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference';
const model = findFineTuneModel(modelName);
if (!model) throw new Error(`unknown base model ${modelName}`);
const tokenizer = model.tokenizer();
const data = records(n);
// The texts as the template renders them: the reference gets exactly the same strings.
const texts = data.flatMap((r) => segmentsOf(r, 'CONVERSATION', tokenizer.chat).map((s) => s.text));

let directTokens = 0;
let pipelineTokens = 0;
const runs: Array<{ direct: number; pipeline: number }> = [];
for (let run = 0; run < 3; run++) {
  const direct = time(() => {
    directTokens = 0;
    for (const t of texts) directTokens += tokenizer.encode(t).length;
  });
  const pipeline = time(() => {
    const chunk = 1000; // as the activity reads records
    pipelineTokens = 0;
    for (let i = 0; i < data.length; i += chunk) {
      const r = tokenizeSft(data.slice(i, i + chunk), {
        tokenizer,
        format: 'CONVERSATION',
        maxSeqLength: Math.min(2048, model.limits.max_seq_length_sft),
        trainOnInputs: 'auto',
        packing: true,
      });
      // The activity writes each row as a JSON line; that serialization is part of its work.
      for (const row of r.rows) {
        JSON.stringify(row);
        pipelineTokens += row.input_ids.length;
      }
    }
  });
  runs.push({ direct, pipeline });
}
const best = (k: 'direct' | 'pipeline') => Math.min(...runs.map((r) => r[k]));
process.stdout.write(
  JSON.stringify(
    {
      model: modelName,
      tokenizer: tokenizer.name,
      records: n,
      tokens_direct: directTokens,
      tokens_pipeline: pipelineTokens, // + BOS/EOS per sample
      direct_seconds: runs.map((r) => Number(r.direct.toFixed(3))),
      pipeline_seconds: runs.map((r) => Number(r.pipeline.toFixed(3))),
      direct_tokens_per_s: Math.round(directTokens / best('direct')),
      pipeline_tokens_per_s: Math.round(pipelineTokens / best('pipeline')),
      // Throughput (tokens per second) of the pipeline over that of the bare tokenizer.
      ratio: Number((pipelineTokens / best('pipeline') / (directTokens / best('direct'))).toFixed(3)),
      target: '>= 0.8',
    },
    null,
    2,
  ) + '\n',
);
