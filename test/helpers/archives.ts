/** Archives and weight files as tests make and read them. */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import tar from 'tar-stream';

/** Unpacks a .tar.zst as a user would: `zstd -d`, then tar. */
export async function extractTarZst(archive: Buffer): Promise<Map<string, Buffer>> {
  const zstd = spawn('zstd', ['-d', '-c', '-q'], { stdio: ['pipe', 'pipe', 'inherit'] });
  zstd.stdin.end(archive);
  const files = new Map<string, Buffer>();
  const extract = tar.extract();
  const done = new Promise<void>((resolve, reject) => {
    extract.on('entry', (header, stream, next) => {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => chunks.push(c as Buffer));
      stream.on('end', () => {
        files.set(header.name, Buffer.concat(chunks));
        next();
      });
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
  });
  zstd.stdout.pipe(extract);
  await done;
  return files;
}

/** The tensor table of a safetensors file held in memory. */
export function safetensorsTable(buf: Buffer): Record<string, { shape: number[] }> {
  const size = Number(buf.readBigUInt64LE(0));
  const table = JSON.parse(buf.subarray(8, 8 + size).toString('utf8'));
  delete table.__metadata__;
  return table;
}

/**
 * A real safetensors file of one float32 tensor `w`: of `shape` (default [2, 3]), every value
 * `fill` (default 1), or random values with `fill: 'random'`.
 */
export function safetensorsFile(opts: { shape?: number[]; fill?: number | 'random' } = {}): Buffer {
  const shape = opts.shape ?? [2, 3];
  const bytes = 4 * shape.reduce((a, b) => a * b, 1);
  const header = Buffer.from(JSON.stringify({ w: { dtype: 'F32', shape, data_offsets: [0, bytes] } }));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  const data = opts.fill === 'random' ? randomBytes(bytes) : Buffer.alloc(bytes, opts.fill ?? 1);
  return Buffer.concat([len, header, data]);
}
