/** Unpacks a .tar.zst as a user would: `zstd -d`, then tar. */
import { spawn } from 'node:child_process';
import tar from 'tar-stream';

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
