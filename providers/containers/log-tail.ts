/**
 * The end of a replica's log file, read without loading the whole file: the logs
 * route shows it, and a runtime quotes it when a replica fails to start.
 */
import { open, type FileHandle } from 'node:fs/promises';

/** The most of a log file read at once. */
export const TAIL_BYTES = 1 << 20;

/** The file opened for reading, or null when it does not exist (yet). */
async function openIfExists(file: string): Promise<FileHandle | null> {
  try {
    return await open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/**
 * The last `maxLines` complete lines, reading at most the last MiB of the file. Asynchronous: an
 * API process serves many log readers and must not block on one file.
 */
export async function tailLines(file: string, maxLines: number): Promise<{ lines: string[]; offset: number }> {
  const fh = await openIfExists(file);
  if (!fh) return { lines: [], offset: 0 };
  try {
    const { size } = await fh.stat();
    const start = Math.max(0, size - TAIL_BYTES);
    const buf = Buffer.alloc(size - start);
    await fh.read(buf, 0, buf.length, start);
    let lines = buf.toString('utf8').split('\n');
    if (start > 0) lines = lines.slice(1); // the first one is cut
    return { lines: lines.filter(Boolean).slice(-maxLines), offset: size };
  } finally {
    await fh.close();
  }
}

/** Bytes appended since `offset`, as complete lines; the new offset stops after the last newline. */
export async function linesSince(file: string, offset: number): Promise<{ lines: string[]; offset: number }> {
  const fh = await openIfExists(file);
  if (!fh) return { lines: [], offset };
  try {
    const { size } = await fh.stat();
    if (size <= offset) return { lines: [], offset };
    const buf = Buffer.alloc(Math.min(size - offset, TAIL_BYTES));
    await fh.read(buf, 0, buf.length, offset);
    const end = buf.lastIndexOf(0x0a);
    if (end < 0) return { lines: [], offset };
    const lines = buf.subarray(0, end).toString('utf8').split('\n').filter(Boolean);
    return { lines, offset: offset + end + 1 };
  } finally {
    await fh.close();
  }
}
