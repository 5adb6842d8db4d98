/**
 * Price estimates for fine-tuning jobs, from the base model's own tokenizer.
 *
 * Billed tokens per epoch: with packing, every token of every sample (cut at
 * max_seq_length), since packed rows carry no padding; without packing, each
 * sample fills a row of max_seq_length (the no-packing rule: its padding is
 * computed too). A preference pair trains two rows. Training tokens are that
 * times n_epochs; evaluation tokens are the validation file's tokens times
 * n_evals (billedTokens, one rule for the quote and the charge).
 *
 * The quote (POST /fine-tunes/estimate-price, and the credit check at creation)
 * counts the files' first ESTIMATE_SCAN_BYTES inside the API request and
 * extrapolates by bytes; the charge at training start is exact: the counts the
 * job's own tokenization recorded (activities/fine-tunes.ts), or a full pass.
 */
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import Decimal from 'decimal.js';
import type { TrainingPlan } from '../shared/fine-tunes';
import type { DatasetFormat } from '../datasets/records';
import type { FineTuneModel } from './models';
import { encodeSample, segmentsOf, tokenizePreference } from './tokenize';

/** One pass over a dataset as its tokenization saw it. */
export interface TokenizedCounts {
  samples: number;
  /** Tokens of every sample, cut at max_seq_length (for a pair: both rows). */
  tokens: number;
}

/** Billed tokens of one pass over a file, from its tokenized counts (the rule in this file's comment). */
export function billedTokens(
  counts: TokenizedCounts,
  plan: Pick<TrainingPlan, 'max_seq_length' | 'packing' | 'method'>,
): number {
  if (plan.packing) return counts.tokens;
  return counts.samples * plan.max_seq_length * (plan.method === 'dpo' ? 2 : 1);
}

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
  plan: Pick<TrainingPlan, 'max_seq_length' | 'packing' | 'train_on_inputs' | 'method'>,
  model: FineTuneModel,
  scanBytes: number,
): Promise<TokenCount> {
  const tokenizer = model.tokenizer();
  const opts = { tokenizer, format, maxSeqLength: plan.max_seq_length, trainOnInputs: plan.train_on_inputs };
  const lines = createInterface({ input, crlfDelay: Infinity });
  const counted: TokenizedCounts = { samples: 0, tokens: 0 };
  let bytes = 0;
  let exact = true;
  for await (const raw of lines) {
    bytes += Buffer.byteLength(raw) + 1;
    const line = raw.replace(/^\uFEFF/, '');
    if (!line.trim()) continue;
    const record = JSON.parse(line);
    counted.samples++;
    if (format === 'PREFERENCE_OPENAI') {
      const { row } = tokenizePreference(record, opts);
      counted.tokens += row.chosen_ids.length + row.rejected_ids.length;
    } else {
      const { ids } = encodeSample(segmentsOf(record, format, tokenizer.chat), opts);
      counted.tokens += Math.min(ids.length, plan.max_seq_length);
    }
    if (bytes >= scanBytes && bytes < fileBytes) {
      exact = false;
      break;
    }
  }
  lines.close();
  input.destroy();
  const scale = exact ? 1 : fileBytes / bytes;
  const samples = Math.round(counted.samples * scale);
  return { samples, tokens: Math.round(billedTokens(counted, plan) * scale), exact };
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

/** The quote counts at most this much of each file (in the API request) and extrapolates the rest. */
export const ESTIMATE_SCAN_BYTES = 32 * 1024 * 1024;

export interface JobPrice {
  trainTokens: number;
  evalTokens: number;
  /** Dollars per token, exact. */
  unitPrice: Decimal;
  /** The whole job, rounded to the micro-dollar. */
  total: Decimal;
}

/** The price of a job from the billed tokens of one pass over each file: over n_epochs and n_evals. */
export function priceFromOnePass(
  trainOnePass: number,
  evalOnePass: number,
  plan: Pick<TrainingPlan, 'n_epochs' | 'n_evals' | 'training_type'>,
  model: FineTuneModel,
): JobPrice {
  const trainTokens = trainOnePass * plan.n_epochs;
  const evalTokens = plan.n_evals > 0 ? evalOnePass * plan.n_evals : 0;
  const perMillion = model.pricePerMillionTokens[plan.training_type];
  return {
    trainTokens,
    evalTokens,
    unitPrice: new Decimal(perMillion).div(1_000_000),
    total: priceOfTokens(trainTokens + evalTokens, perMillion),
  };
}

/**
 * The price of a job by counting its files: over their first `scanBytes` each (the quote), or
 * all of them (`Infinity`: exact).
 */
export async function priceFineTuneJob(
  train: PricedFile,
  evalFile: PricedFile | null,
  plan: TrainingPlan,
  model: FineTuneModel,
  scanBytes: number,
): Promise<JobPrice> {
  const count = async (f: PricedFile) =>
    (await countBilledTokens(f.read(), f.bytes, f.format, plan, model, scanBytes)).tokens;
  const evalOnePass = evalFile && plan.n_evals > 0 ? await count(evalFile) : 0;
  return priceFromOnePass(await count(train), evalOnePass, plan, model);
}
