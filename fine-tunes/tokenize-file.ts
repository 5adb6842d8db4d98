/**
 * A stored, validated dataset file -> the trainer's rows, stored as JSON lines: read a chunk of
 * records at a time (bounded memory), tokenize (fine-tunes/tokenize.ts), pack, write. The
 * prepareTrainingData activity runs it for the training and validation files; bench/tokenization.ts
 * measures it against the bare tokenizer.
 */
import { createInterface } from 'node:readline';
import { Readable } from 'node:stream';
import type { DatasetFormat } from '../datasets/records';
import type { BlobStore } from '../providers/storage/blob-store';
import { tokenizePreference, tokenizeSft, type TrainOnInputs } from './tokenize';
import type { Tokenizer } from './tokenizer';

/** Records tokenized at once: large enough for packing to fill rows, small enough to bound memory. */
const TOKENIZE_CHUNK = 1000;

export interface TokenizeFileOptions {
  tokenizer: Tokenizer;
  format: DatasetFormat;
  method: 'sft' | 'dpo';
  maxSeqLength: number;
  trainOnInputs: TrainOnInputs;
  /** SFT only: concatenate samples into rows of exactly maxSeqLength. */
  packing: boolean;
  /** Called before each chunk with the samples read so far (the activity heartbeats on it). */
  onChunk?: (samplesSoFar: number) => void;
}

/** JSON records of a stored JSONL file, a chunk at a time. */
async function* recordChunks(blobs: BlobStore, key: string): AsyncGenerator<Record<string, unknown>[]> {
  const lines = createInterface({ input: blobs.read(key, undefined, { chunkBytes: 1 << 20 }), crlfDelay: Infinity });
  let chunk: Record<string, unknown>[] = [];
  for await (const raw of lines) {
    const line = raw.replace(/^\uFEFF/, '');
    if (!line.trim()) continue;
    chunk.push(JSON.parse(line));
    if (chunk.length === TOKENIZE_CHUNK) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length) yield chunk;
}

/** Tokenizes the file at `sourceKey` into JSON lines at `destKey`; what it wrote. */
export async function tokenizeStoredFile(
  blobs: BlobStore,
  sourceKey: string,
  destKey: string,
  o: TokenizeFileOptions,
): Promise<{ rows: number; tokens: number; samples: number }> {
  let rows = 0;
  let tokens = 0;
  let samples = 0;
  const out = Readable.from(
    (async function* () {
      for await (const records of recordChunks(blobs, sourceKey)) {
        o.onChunk?.(samples);
        samples += records.length;
        if (o.method === 'dpo') {
          for (const r of records) {
            const { row } = tokenizePreference(r, {
              tokenizer: o.tokenizer,
              format: o.format,
              maxSeqLength: o.maxSeqLength,
              trainOnInputs: o.trainOnInputs,
            });
            rows++;
            tokens += row.chosen_ids.length + row.rejected_ids.length;
            yield JSON.stringify(row) + '\n';
          }
          continue;
        }
        const result = tokenizeSft(records, {
          tokenizer: o.tokenizer,
          format: o.format,
          maxSeqLength: o.maxSeqLength,
          trainOnInputs: o.trainOnInputs,
          packing: o.packing,
        });
        rows += result.rows.length;
        tokens += result.totalTokens;
        for (const row of result.rows) yield JSON.stringify(row) + '\n';
      }
    })(),
  );
  await blobs.put(destKey, out, { maxBytes: Number.MAX_SAFE_INTEGER });
  return { rows, tokens, samples };
}
