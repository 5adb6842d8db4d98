/**
 * Reads the header of a safetensors file: 8 bytes of little-endian length,
 * then a JSON table of tensor names, dtypes, shapes and byte offsets.
 */
import { openSync, readSync, closeSync } from 'node:fs';
import { buffer } from 'node:stream/consumers';
import type { BlobStore } from '../storage/blob-store';

export interface TensorInfo {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

export function readSafetensorsHeader(file: string): Record<string, TensorInfo> {
  const fd = openSync(file, 'r');
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const size = Number(len.readBigUInt64LE(0));
    if (size <= 0 || size > 100 * 1024 * 1024) throw new Error(`${file}: implausible safetensors header size ${size}`);
    const header = Buffer.alloc(size);
    readSync(fd, header, 0, size, 8);
    const table = JSON.parse(header.toString('utf8')) as Record<string, TensorInfo>;
    delete (table as Record<string, unknown>).__metadata__;
    return table;
  } finally {
    closeSync(fd);
  }
}

/** The tensor table of a stored safetensors file, read with two ranged reads. */
export async function safetensorsHeader(blobs: BlobStore, key: string): Promise<Record<string, TensorInfo>> {
  const len = (await buffer(blobs.read(key, { start: 0, end: 7 }))).readBigUInt64LE(0);
  if (len <= 0n || len > 100n * 1024n * 1024n) throw new Error(`${key}: not a safetensors file`);
  const header = await buffer(blobs.read(key, { start: 8, end: 8 + Number(len) - 1 }));
  const table = JSON.parse(header.toString('utf8'));
  delete table.__metadata__;
  return table;
}

/**
 * Whether a revision's files are a usable model: its weights are safetensors with a readable
 * header (the tensors give the parameter count). Errors are sentences naming the file.
 */
export async function checkRevisionWeights(
  blobs: BlobStore,
  prefix: string,
  paths: string[],
): Promise<{ parameters: number; errors: string[] }> {
  const weights = paths.filter((p) => p.endsWith('.safetensors'));
  let parameters = 0;
  const errors: string[] = [];
  if (!weights.length) errors.push('no .safetensors file among the uploaded files');
  for (const w of weights) {
    try {
      for (const t of Object.values(await safetensorsHeader(blobs, `${prefix}/${w}`))) {
        parameters += t.shape.reduce((a, b) => a * b, 1);
      }
    } catch (err) {
      errors.push(`${w}: ${(err as Error).message}`);
    }
  }
  return { parameters, errors };
}
