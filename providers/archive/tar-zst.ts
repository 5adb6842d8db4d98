/**
 * Streams files as a `.tar.zst` archive (the format of weight and dataset
 * downloads): tar-stream packs, the `zstd` program compresses, nothing is
 * held whole in memory. `zstd` comes from the OS (Debian package `zstd`).
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { subprocessEnv } from '../process/subprocess-env';

export interface ArchiveEntry {
  name: string;
  size: number;
  open: () => Readable;
}

export class ZstdMissingError extends Error {
  constructor() {
    super('The zstd program is not installed on this host (Debian: apt-get install zstd).');
  }
}

/** A readable .tar.zst of `entries`, in order. Errors surface on the returned stream. */
export function tarZstStream(entries: ArchiveEntry[], level = 3): Readable {
  const pack = tar.pack();
  const zstd = spawn('zstd', ['-q', '-c', `-${level}`, '-T0'], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: subprocessEnv(),
  });
  zstd.on('error', (err: NodeJS.ErrnoException) => {
    zstd.stdout.destroy(err.code === 'ENOENT' ? new ZstdMissingError() : err);
  });
  (async () => {
    for (const e of entries) {
      const sink = pack.entry({ name: e.name, size: e.size, mode: 0o644 });
      await pipeline(e.open(), sink);
    }
    pack.finalize();
  })().catch((err) => pack.destroy(err));
  pipeline(pack, zstd.stdin).catch((err) => zstd.stdout.destroy(err));
  let stderr = '';
  zstd.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  zstd.on('close', (code) => {
    if (code) zstd.stdout.destroy(new Error(`zstd exited with ${code}: ${stderr.trim()}`));
  });
  return zstd.stdout;
}

/** Checks that the zstd program can run (for a clear error before a response starts). */
export async function assertZstdAvailable(): Promise<void> {
  const probe = spawn('zstd', ['--version'], { stdio: 'ignore' });
  const [code] = (await Promise.race([
    once(probe, 'exit'),
    once(probe, 'error').then(([err]) => {
      throw (err as NodeJS.ErrnoException).code === 'ENOENT' ? new ZstdMissingError() : err;
    }),
  ])) as [number];
  if (code !== 0) throw new ZstdMissingError();
}
