/**
 * The end of a replica's log file, read without loading the whole file: the logs
 * route shows it, and a runtime quotes it when a replica fails to start.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';

/** The most of a log file read at once. */
export const TAIL_BYTES = 1 << 20;

/** The last `maxLines` complete lines, reading at most the last MiB of the file. */
export function tailLines(file: string, maxLines: number): { lines: string[]; offset: number } {
  if (!existsSync(file)) return { lines: [], offset: 0 };
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const start = Math.max(0, size - TAIL_BYTES);
    const buf = Buffer.alloc(size - start);
    readSync(fd, buf, 0, buf.length, start);
    let lines = buf.toString('utf8').split('\n');
    if (start > 0) lines = lines.slice(1); // the first one is cut
    return { lines: lines.filter(Boolean).slice(-maxLines), offset: size };
  } finally {
    closeSync(fd);
  }
}
