/**
 * The end of a replica's log file, read without loading the whole file: the logs
 * route shows it, and a runtime quotes it when a replica fails to start. A log that
 * outgrew its limit was rotated (replica-log.ts): what it held last is in `<file>.1`,
 * and the file starts again.
 */
import { open, stat, type FileHandle } from 'node:fs/promises';
import { rotatedLogFile } from './replica-log';

/** The most of a log file read at once. */
export const TAIL_BYTES = 1 << 20;

/** Where a reader of a log stands. */
export interface LogPosition {
  /** Bytes of the file read. */
  offset: number;
  /** The inode of the rotated file when last read (0: none): another one means a rotation since. */
  rotated: number;
}

/** The file opened for reading, or null when it does not exist (yet). */
async function openIfExists(file: string): Promise<FileHandle | null> {
  try {
    return await open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

const inodeOf = (file: string) =>
  stat(file).then(
    (s) => s.ino,
    () => 0,
  );

/** The complete lines in the last `maxBytes` of the file, and its size. */
async function lastLines(file: string, maxBytes: number): Promise<{ lines: string[]; size: number }> {
  const fh = await openIfExists(file);
  if (!fh) return { lines: [], size: 0 };
  try {
    const { size } = await fh.stat();
    const start = Math.max(0, size - maxBytes);
    const buf = Buffer.alloc(size - start);
    await fh.read(buf, 0, buf.length, start);
    let lines = buf.toString('utf8').split('\n');
    if (start > 0) lines = lines.slice(1); // the first one is cut
    return { lines: lines.filter(Boolean), size };
  } finally {
    await fh.close();
  }
}

/** The complete lines after `offset` (from the start if the file is now shorter), and where they end. */
async function linesFrom(file: string, offset: number): Promise<{ lines: string[]; offset: number }> {
  const fh = await openIfExists(file);
  if (!fh) return { lines: [], offset: 0 };
  try {
    const { size } = await fh.stat();
    if (size < offset) offset = 0; // truncated under us
    if (size === offset) return { lines: [], offset };
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

/**
 * The last `maxLines` complete lines, reading at most the last MiB (of the file, and of the rotated
 * one when the file holds fewer lines). Asynchronous: an API process serves many log readers and
 * must not block on one file.
 */
export async function tailLines(file: string, maxLines: number): Promise<{ lines: string[]; position: LogPosition }> {
  const rotated = await inodeOf(rotatedLogFile(file));
  const current = await lastLines(file, TAIL_BYTES);
  let lines = current.lines;
  if (lines.length < maxLines && rotated && current.size < TAIL_BYTES) {
    lines = [...(await lastLines(rotatedLogFile(file), TAIL_BYTES - current.size)).lines, ...lines];
  }
  return { lines: lines.slice(-maxLines), position: { offset: current.size, rotated } };
}

/**
 * Lines appended since `position`, complete ones only, and the new position. Across a rotation:
 * the rest of what was read from (now in the rotated file), then the file from its start.
 */
export async function linesSince(
  file: string,
  position: LogPosition,
): Promise<{ lines: string[]; position: LogPosition }> {
  const rotated = await inodeOf(rotatedLogFile(file));
  if (rotated === position.rotated) {
    const next = await linesFrom(file, position.offset);
    return { lines: next.lines, position: { offset: next.offset, rotated } };
  }
  // The rotated file is the whole file as it was before it started again: the reader's offset holds in it.
  const rest = await linesFrom(rotatedLogFile(file), position.offset);
  const fresh = await linesFrom(file, 0);
  return { lines: [...rest.lines, ...fresh.lines], position: { offset: fresh.offset, rotated } };
}
