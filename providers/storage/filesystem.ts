/** Blob store on the local filesystem (default: .data/blobs). */
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { assertSafeKey, BlobTooLargeError, type BlobStore, type StoredBlob } from './blob-store';

export class FilesystemBlobStore implements BlobStore {
  constructor(private readonly root: string) {}

  localPath(key: string): string {
    assertSafeKey(key);
    const full = path.resolve(this.root, key);
    // Belt and braces: the key rules already make escaping impossible.
    if (!full.startsWith(path.resolve(this.root) + path.sep)) throw new Error(`blob key escapes the store: ${key}`);
    return full;
  }

  async put(key: string, body: Readable, { maxBytes }: { maxBytes: number }): Promise<StoredBlob> {
    const target = this.localPath(key);
    await mkdir(path.dirname(target), { recursive: true });
    // Written under a temporary name and renamed only when complete, so a
    // reader never sees half a blob and a failed upload leaves nothing.
    const temp = `${target}.partial-${randomBytes(6).toString('hex')}`;
    const hash = createHash('sha256');
    let bytes = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        bytes += chunk.length;
        if (bytes > maxBytes) return done(new BlobTooLargeError(maxBytes));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    const out = createWriteStream(temp, { flags: 'wx', mode: 0o600 });
    try {
      await pipeline(body, meter, out);
      await rename(temp, target);
    } catch (err) {
      // A stream that failed early may still be opening its file: wait until it is closed, or the
      // file would appear after the rm below and stay behind.
      if (!out.closed) await once(out, 'close').catch(() => undefined);
      await rm(temp, { force: true });
      throw err;
    }
    return { bytes, sha256: hash.digest('hex') };
  }

  read(key: string, range?: { start: number; end: number }, opts: { chunkBytes?: number } = {}): Readable {
    return createReadStream(this.localPath(key), { ...range, highWaterMark: opts.chunkBytes });
  }

  async size(key: string): Promise<number | null> {
    try {
      return (await stat(this.localPath(key))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.localPath(key), { force: true });
  }
}
