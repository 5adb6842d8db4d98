/**
 * The blob store holds uploaded files (and later tokenized datasets,
 * checkpoints, weights). Keys are made by Gantry, never by users: a user's file
 * name is metadata in PostgreSQL and never becomes a path.
 */
import type { Readable } from 'node:stream';

export interface StoredBlob {
  bytes: number;
  sha256: string;
}

export class BlobTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`blob exceeds the limit of ${limit} bytes`);
  }
}

export interface BlobStore {
  /**
   * Streams `body` into `key`, computing size and SHA-256 on the way. The blob
   * appears only when the stream ended completely within `maxBytes`; on any
   * failure nothing is left behind.
   */
  put(key: string, body: Readable, opts: { maxBytes: number }): Promise<StoredBlob>;
  /** A stream of the blob, or of bytes [start, end] inclusive; `chunkBytes` sets the read size. */
  read(key: string, range?: { start: number; end: number }, opts?: { chunkBytes?: number }): Readable;
  size(key: string): Promise<number | null>;
  delete(key: string): Promise<void>;
  /** A local path for random access (Parquet footers); filesystem stores only. */
  localPath(key: string): string;
}

/** Keys are slash-separated segments of safe characters: no `..`, no absolute paths. */
const SAFE_KEY = /^[a-z0-9][a-z0-9._-]*(\/[a-z0-9][a-z0-9._-]*)*$/i;

export function assertSafeKey(key: string): void {
  if (!SAFE_KEY.test(key) || key.split('/').some((s) => s === '..' || s === '.')) {
    throw new Error(`unsafe blob key: ${JSON.stringify(key)}`);
  }
}
