/**
 * Price estimates for fine-tuning jobs, from the base model's own tokenizer.
 *
 * Billed tokens per epoch: with packing, every token of every sample (cut at
 * max_seq_length), since packed rows carry no padding; without packing, each
 * sample fills a row of max_seq_length (the no-packing rule: its padding is
 * computed too). Training tokens are that times n_epochs; evaluation tokens
 * are the validation file's tokens times n_evals. Large files are counted
 * exactly up to a scan limit and extrapolated by bytes beyond it.
 */
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import Decimal from 'decimal.js';
import type { TrainingPlan } from '../common/fine-tunes';
import type { DatasetFormat } from '../datasets/records';
import type { FineTuneModel } from './models';
import { encodeSample, segmentsOf, tokenizePreference } from './tokenize';

export interface TokenCount {
  samples: number;
  /** Billed tokens of one pass over the file. */
  tokens: number;
  /** False when the count was extrapolated from the first scanBytes of the file. */
  exact: boolean;
}

export async function countBilledTokens(
  input: Readable,
  fileBytes: number,
  format: DatasetFormat,
  plan: Pick<TrainingPlan, 'max_seq_length' | 'packing' | 'train_on_inputs'>,
  model: FineTuneModel,
  scanBytes: number,
): Promise<TokenCount> {
  const tokenizer = model.tokenizer();
  const opts = { tokenizer, format, maxSeqLength: plan.max_seq_length, trainOnInputs: plan.train_on_inputs };
  const lines = createInterface({ input, crlfDelay: Infinity });
  let samples = 0;
  let tokens = 0;
  let bytes = 0;
  let exact = true;
  for await (const raw of lines) {
    bytes += Buffer.byteLength(raw) + 1;
    const line = raw.replace(/^\uFEFF/, '');
    if (!line.trim()) continue;
    const record = JSON.parse(line);
    samples++;
    if (format === 'PREFERENCE_OPENAI') {
      // A pair trains two rows, the chosen and the rejected answer, each after the prompt.
      const { row } = tokenizePreference(record, opts);
      tokens += plan.packing ? row.chosen_ids.length + row.rejected_ids.length : 2 * plan.max_seq_length;
    } else {
      const { ids } = encodeSample(segmentsOf(record, format, tokenizer.chat), opts);
      tokens += plan.packing ? Math.min(ids.length, plan.max_seq_length) : plan.max_seq_length;
    }
    if (bytes >= scanBytes && bytes < fileBytes) {
      exact = false;
      break;
    }
  }
  lines.close();
  input.destroy();
  if (!exact) {
    const scale = fileBytes / bytes;
    return { samples: Math.round(samples * scale), tokens: Math.round(tokens * scale), exact };
  }
  return { samples, tokens, exact };
}

/** Dollars for a number of tokens at a price per million, rounded to the micro-dollar. */
export function priceOfTokens(tokens: number, pricePerMillion: string): Decimal {
  return new Decimal(tokens).mul(pricePerMillion).div(1_000_000).toDecimalPlaces(6, Decimal.ROUND_HALF_UP);
}

/** A dataset file as the price counts it. */
export interface PricedFile {
  read: () => Readable;
  bytes: number;
  format: DatasetFormat;
}

/** Files above this are counted over their first bytes and extrapolated. */
export const ESTIMATE_SCAN_BYTES = 256 * 1024 * 1024;

export interface JobPrice {
  trainTokens: number;
  evalTokens: number;
  /** Dollars per token, exact. */
  unitPrice: Decimal;
  /** The whole job, rounded to the micro-dollar: what the estimate quotes and the job is charged. */
  total: Decimal;
}

/**
 * The price of a job: training tokens over n_epochs, evaluation tokens over
 * n_evals, at the model's price for the training type. The estimate route
 * quotes it and the job is charged it when training starts, so the two agree.
 */
export async function priceFineTuneJob(
  train: PricedFile,
  evalFile: PricedFile | null,
  plan: TrainingPlan,
  model: FineTuneModel,
): Promise<JobPrice> {
  const count = (f: PricedFile) => countBilledTokens(f.read(), f.bytes, f.format, plan, model, ESTIMATE_SCAN_BYTES);
  const trainTokens = (await count(train)).tokens * plan.n_epochs;
  const evalTokens = evalFile && plan.n_evals > 0 ? (await count(evalFile)).tokens * plan.n_evals : 0;
  const perMillion = model.pricePerMillionTokens[plan.training_type];
  return {
    trainTokens,
    evalTokens,
    unitPrice: new Decimal(perMillion).div(1_000_000),
    total: priceOfTokens(trainTokens + evalTokens, perMillion),
  };
}
