/**
 * Streams a CSV dataset (evaluation data) through csv-parse and checks the
 * header and every row. Quoted fields may span lines; positions come from the
 * parser, so a resumed run continues at the exact record boundary.
 */
import type { Readable } from 'node:stream';
import { parse, CsvError } from 'csv-parse';
import { checkCsvHeader, checkCsvRow, initialRecordsState } from './records';
import type { DriverOptions, ValidationOutcome, ValidationProgress } from './progress';

const PROGRESS_EVERY_RECORDS = 50_000;
const MAX_FIELD_BYTES = 16 * 1024 * 1024;

export async function validateCsv(stream: Readable, opts: DriverOptions = {}): Promise<ValidationOutcome> {
  const progress: ValidationProgress = opts.resume
    ? structuredClone(opts.resume)
    : { offset: 0, line: 0, state: initialRecordsState() };
  const base = { offset: progress.offset, line: progress.line };
  const parser = stream.pipe(
    parse({ info: true, bom: base.offset === 0, relax_column_count: true, max_record_size: MAX_FIELD_BYTES }),
  );
  const fail = (line: number, reason: string): ValidationOutcome => ({ ok: false, line, reason, progress });
  let sinceReport = 0;
  try {
    for await (const { record, info } of parser as AsyncIterable<{
      record: string[];
      info: { lines: number; bytes: number };
    }>) {
      if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
      const line = base.line + info.lines;
      if (!progress.header) {
        const reason = checkCsvHeader(record);
        if (reason) return fail(line, reason);
        progress.header = record;
      } else {
        const reason = checkCsvRow(progress.header, record);
        if (reason) return fail(line, reason);
        progress.state.nlines++;
      }
      progress.line = line;
      progress.offset = base.offset + info.bytes;
      if (++sinceReport >= PROGRESS_EVERY_RECORDS) {
        opts.onProgress?.(progress);
        sinceReport = 0;
      }
    }
  } catch (err) {
    if (err instanceof CsvError) {
      const line = base.line + Number((err as CsvError & { lines?: number }).lines ?? progress.line + 1);
      return fail(line, `the CSV cannot be parsed: ${err.message.replace(/^[A-Z_]+: /, '')}`);
    }
    throw err;
  }
  if (!progress.header) return fail(1, 'the file is empty; a CSV needs a header line and at least one row');
  if (progress.state.nlines === 0) return fail(progress.line + 1, 'the CSV has a header but no rows');
  opts.onProgress?.(progress);
  return { ok: true, progress };
}
