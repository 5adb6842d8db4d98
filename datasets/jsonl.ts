/**
 * Streams a JSONL dataset line by line and checks each record, never holding
 * more than one chunk and one line in memory. Works on bytes so it can report
 * exact byte offsets (for resuming) and find invalid UTF-8 per line.
 */
import type { Readable } from 'node:stream';
import { checkRecord, initialRecordsState, type DatasetPurpose } from './records';
import type { DriverOptions, ValidationOutcome, ValidationProgress } from './progress';

const NEWLINE = 0x0a;
/** Checks and decodes in one pass: invalid UTF-8 throws. (The BOM is removed by checkLine itself.) */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const PROGRESS_EVERY_BYTES = 4 * 1024 * 1024;
/** One record larger than this is refused, so a file without newlines cannot fill memory. */
export const MAX_LINE_BYTES = 64 * 1024 * 1024;

function isBlank(line: Buffer): boolean {
  for (const b of line) if (b !== 0x20 && b !== 0x09 && b !== 0x0d) return false;
  return true;
}

/** Checks one line (without its newline); returns a reason or null. */
function checkLine(raw: Buffer, purpose: DatasetPurpose, progress: ValidationProgress, last: boolean): string | null {
  let line = raw;
  if (line.length && line[line.length - 1] === 0x0d) line = line.subarray(0, line.length - 1); // CRLF files
  if (progress.offset === 0 && line.subarray(0, 3).equals(BOM)) line = line.subarray(3);
  if (isBlank(line)) {
    return 'the line is blank; every line must hold one JSON object (remove empty lines)';
  }
  let text: string;
  try {
    text = UTF8.decode(line);
  } catch {
    return 'the line is not valid UTF-8; save the file as UTF-8';
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const detail = (err as Error).message;
    return last
      ? `the last line is not complete JSON (${detail}); the file may be truncated`
      : `the line is not valid JSON (${detail})`;
  }
  return checkRecord(value, purpose, progress.state);
}

export async function validateJsonl(
  stream: Readable,
  purpose: DatasetPurpose,
  opts: DriverOptions = {},
): Promise<ValidationOutcome> {
  const progress: ValidationProgress = opts.resume
    ? structuredClone(opts.resume)
    : { offset: 0, line: 0, state: initialRecordsState() };
  let carry: Buffer | null = null;
  let reportedAt = progress.offset;

  const fail = (reason: string): ValidationOutcome => ({ ok: false, line: progress.line + 1, reason, progress });

  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
    let start = 0;
    if (carry) {
      // Only the line that spans chunks is joined: copying every chunk onto the carried bytes
      // would allocate a chunk's worth per chunk, and the garbage raised the peak memory.
      const nl = chunk.indexOf(NEWLINE);
      if (nl < 0) {
        carry = Buffer.concat([carry, chunk]);
      } else {
        const line = Buffer.concat([carry, chunk.subarray(0, nl)]);
        const reason = checkLine(line, purpose, progress, false);
        if (reason) return fail(reason);
        progress.line++;
        progress.offset += line.length + 1;
        carry = null;
        start = nl + 1;
      }
    }
    if (!carry) {
      for (;;) {
        const nl = chunk.indexOf(NEWLINE, start);
        if (nl < 0) break;
        const reason = checkLine(chunk.subarray(start, nl), purpose, progress, false);
        if (reason) return fail(reason);
        progress.line++;
        progress.offset += nl + 1 - start;
        start = nl + 1;
      }
      carry = start < chunk.length ? Buffer.from(chunk.subarray(start)) : null;
    }
    if (carry && carry.length > MAX_LINE_BYTES) {
      return fail(
        `the line is longer than ${MAX_LINE_BYTES / 1024 / 1024} MiB; split the record or check that lines end with a newline`,
      );
    }
    if (progress.offset - reportedAt >= PROGRESS_EVERY_BYTES) {
      opts.onProgress?.(progress);
      reportedAt = progress.offset;
    }
  }
  if (carry && carry.length) {
    // A last line without a trailing newline is fine when it is complete.
    const reason = checkLine(carry, purpose, progress, true);
    if (reason) return fail(reason);
    progress.line++;
    progress.offset += carry.length;
  }
  if (progress.state.nlines === 0) return { ok: false, line: 1, reason: 'the file holds no records', progress };
  opts.onProgress?.(progress);
  return { ok: true, progress };
}
