/**
 * The end of a replica's log file, read without loading the whole file: the logs
 * route shows it, and a runtime quotes it when a replica fails to start. A log that
 * outgrew its limit was rotated (replica-log.ts): what it held last is in `<file>.1`,
 * and the file starts again.
 */
import { open, stat, type FileHandle } from 'node:fs/promises';
import { rotatedLogFile, rotatingLogFile, STALE_ROTATION_MS } from './replica-log';

/** The most of a log file read at once. */
export const TAIL_BYTES = 1 << 20;

/** Where a reader of a log stands. */
export interface LogPosition {
  /** Bytes read: of the file, or of the rotated file while `draining`. */
  offset: number;
  /**
   * Which rotated file there was when last read ('': none), by generationOf: another means a
   * rotation since.
   */
  rotated: string;
  /** Reading the rest of the rotated file (what the file held when it was rotated) before the file. */
  draining?: boolean;
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

/**
 * A rotation is under way: the file may be truncated while its copy is not yet in place. (A copy
 * left by a host that died mid-rotation stops counting once it has not been written for a while.)
 */
const rotating = (file: string) =>
  stat(rotatingLogFile(file)).then(
    (s) => s.mtimeMs > Date.now() - STALE_ROTATION_MS,
    () => false,
  );

/**
 * Which file this is: its inode, and when it last changed hands (a rotation renames the copy into
 * place). The inode alone is not enough: one freed by the rotation before is soon given to the
 * next copy, and a reader would take a new rotation for none.
 */
const generationOf = (file: string) =>
  stat(file, { bigint: true }).then(
    (s) => `${s.ino}:${s.ctimeNs}`,
    () => '',
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

/**
 * The complete lines after `offset`, where they end, and whether more is there to read. A file
 * shorter than `offset` is being rotated (truncated, its copy not yet in place): nothing is read.
 */
async function linesFrom(file: string, offset: number): Promise<{ lines: string[]; offset: number; more: boolean }> {
  const fh = await openIfExists(file);
  if (!fh) return { lines: [], offset, more: false };
  try {
    const { size } = await fh.stat();
    if (size <= offset) return { lines: [], offset, more: false };
    // One byte before too: a read that should start a line but does not (a rotation came between
    // two reads unseen) drops the cut line rather than pass on half of one.
    const from = offset > 0 ? offset - 1 : 0;
    const buf = Buffer.alloc(Math.min(size - from, TAIL_BYTES));
    await fh.read(buf, 0, buf.length, from);
    const end = buf.lastIndexOf(0x0a);
    if (end < (offset > 0 ? 1 : 0)) return { lines: [], offset, more: false };
    let lines = buf.subarray(0, end).toString('utf8').split('\n');
    // What precedes the first newline: nothing when `offset` starts a line, else the cut line.
    if (offset > 0) lines = lines.slice(1);
    return { lines: lines.filter(Boolean), offset: from + end + 1, more: from + buf.length < size };
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
  // A rotation takes a moment; one that never ends was left by a host that died (STALE_ROTATION_MS).
  for (let attempt = 1; ; attempt++) {
    if (attempt < 100 && (await rotating(file))) {
      await new Promise((r) => setTimeout(r, 20));
      continue;
    }
    const rotated = await generationOf(rotatedLogFile(file));
    const current = await lastLines(file, TAIL_BYTES);
    let lines = current.lines;
    if (lines.length < maxLines && rotated && current.size < TAIL_BYTES) {
      lines = [...(await lastLines(rotatedLogFile(file), TAIL_BYTES - current.size)).lines, ...lines];
    }
    // Rotated while it was read: read again, so the position and the lines are of one generation.
    if (attempt < 100 && ((await rotating(file)) || (await generationOf(rotatedLogFile(file))) !== rotated)) continue;
    return { lines: lines.slice(-maxLines), position: { offset: current.size, rotated } };
  }
}

/**
 * Lines appended since `position`, complete ones only, and the new position. Across a rotation:
 * the rest of the file as it was (now the rotated file, a whole copy, so the reader's offset holds
 * in it), then the file from its start. A reader that missed a whole rotation (it did not read
 * between two, which are a check interval apart) has lost the older copy, and reads the newer one
 * from where it stood in the older: it skips lines, never repeats them.
 */
export async function linesSince(
  file: string,
  position: LogPosition,
): Promise<{ lines: string[]; position: LogPosition }> {
  // Mid-rotation the file may already be truncated and written again: read once the copy is in place.
  if (await rotating(file)) return { lines: [], position };
  const rotated = await generationOf(rotatedLogFile(file));
  const next = await readSince(file, position, rotated);
  // A rotation that began while this read (a reader can be held up for any time between two
  // reads) may have mixed two generations of the file in it: read again next time. Checked in this
  // order, a rotation that truncated the file under the read is seen either way: its copy is still
  // being made, or it has taken the rotated file's place.
  if ((await rotating(file)) || (await generationOf(rotatedLogFile(file))) !== rotated) return { lines: [], position };
  return next;
}

async function readSince(
  file: string,
  position: LogPosition,
  rotated: string,
): Promise<{ lines: string[]; position: LogPosition }> {
  if (!position.draining && rotated === position.rotated) {
    const next = await linesFrom(file, position.offset);
    return { lines: next.lines, position: { offset: next.offset, rotated } };
  }
  // Rotated since (or rotated again while draining: what was left of the earlier copy is gone).
  const offset = position.draining && rotated !== position.rotated ? 0 : position.offset;
  const rest = await linesFrom(rotatedLogFile(file), offset);
  if (rest.more) return { lines: rest.lines, position: { offset: rest.offset, rotated, draining: true } };
  const fresh = await linesFrom(file, 0);
  return { lines: [...rest.lines, ...fresh.lines], position: { offset: fresh.offset, rotated } };
}
