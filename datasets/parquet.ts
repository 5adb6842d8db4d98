/**
 * Checks a pre-tokenized Parquet dataset (columns input_ids, attention_mask,
 * labels) one row group at a time, so memory is bounded by the largest row
 * group rather than the file. Progress is the next row group to read.
 */
import { initialRecordsState } from './records';
import type { DatasetPurpose } from './records';
import type { DriverOptions, ValidationOutcome, ValidationProgress } from './progress';

export const PARQUET_COLUMNS = ['input_ids', 'attention_mask', 'labels'] as const;
/** The official SDK's client-side limit for Parquet files (4.9 GiB). */
export const DEFAULT_MAX_PARQUET_BYTES = Math.floor(4.9 * 2 ** 30);

const isInt = (v: unknown) => (typeof v === 'number' && Number.isInteger(v)) || typeof v === 'bigint';

function checkRow(row: Record<string, unknown>): string | null {
  const ids = row.input_ids;
  if (!Array.isArray(ids) || ids.length === 0) return '`input_ids` must be a non-empty list of integers';
  if (!ids.every((v) => isInt(v) && Number(v) >= 0)) return '`input_ids` must hold non-negative integer token ids';
  for (const column of ['attention_mask', 'labels'] as const) {
    const value = row[column];
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value)) return `\`${column}\` must be a list of integers`;
    if (value.length !== ids.length) {
      return `\`${column}\` has ${value.length} entries but \`input_ids\` has ${ids.length}; they must be the same length`;
    }
    if (column === 'attention_mask' && !value.every((v) => Number(v) === 0 || Number(v) === 1)) {
      return '`attention_mask` may only hold 0 and 1';
    }
    if (column === 'labels' && !value.every(isInt)) return '`labels` must hold integers (-100 for ignored positions)';
  }
  return null;
}

/**
 * Names of the top-level columns. Parquet stores the schema as a flattened
 * tree (depth first, each node saying how many children follow), so nested
 * list elements must be skipped rather than read as columns.
 */
function topLevelColumns(schema: Array<{ name: string; num_children?: number }>): string[] {
  const subtreeEnd = (i: number): number => {
    let next = i + 1;
    for (let k = 0; k < (schema[i].num_children ?? 0); k++) next = subtreeEnd(next);
    return next;
  };
  const names: string[] = [];
  for (let i = 1; i < schema.length; i = subtreeEnd(i)) names.push(schema[i].name);
  return names;
}

export async function validateParquet(
  path: string,
  purpose: DatasetPurpose,
  opts: DriverOptions & { fileBytes: number; maxBytes?: number },
): Promise<ValidationOutcome> {
  const progress: ValidationProgress = opts.resume
    ? structuredClone(opts.resume)
    : { offset: 0, line: 0, state: initialRecordsState() };
  const fail = (line: number, reason: string): ValidationOutcome => ({ ok: false, line, reason, progress });
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_PARQUET_BYTES;

  if (purpose !== 'fine-tune') {
    return fail(1, `Parquet files are not supported for ${purpose}; upload JSONL or CSV`);
  }
  if (opts.fileBytes > maxBytes) {
    return fail(1, `the Parquet file is ${opts.fileBytes} bytes; the maximum supported size is ${maxBytes} bytes`);
  }
  const { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects } = await import('hyparquet');
  const file = await asyncBufferFromFile(path);
  let metadata;
  try {
    metadata = await parquetMetadataAsync(file);
  } catch (err) {
    return fail(1, `not a readable Parquet file (${(err as Error).message})`);
  }
  const topLevel = new Set(topLevelColumns(metadata.schema));
  if (!topLevel.has('input_ids')) return fail(1, 'the Parquet file has no `input_ids` column');
  const unexpected = [...topLevel].filter((c) => !(PARQUET_COLUMNS as readonly string[]).includes(c));
  if (unexpected.length) {
    return fail(
      1,
      `unexpected column \`${unexpected[0]}\`; a tokenized dataset has only ${PARQUET_COLUMNS.join(', ')}`,
    );
  }

  let rowStart = 0;
  for (let g = 0; g < metadata.row_groups.length; g++) {
    const rows = Number(metadata.row_groups[g].num_rows);
    if (g < progress.offset) {
      rowStart += rows;
      continue;
    }
    if (opts.signal?.aborted) throw opts.signal.reason ?? new Error('aborted');
    const objects = await parquetReadObjects({ file, metadata, rowStart, rowEnd: rowStart + rows });
    for (let i = 0; i < objects.length; i++) {
      const reason = checkRow(objects[i]);
      if (reason) return fail(rowStart + i + 1, reason);
    }
    rowStart += rows;
    progress.offset = g + 1;
    progress.line = rowStart;
    progress.state.nlines = rowStart;
    opts.onProgress?.(progress);
  }
  if (rowStart === 0) return fail(1, 'the Parquet file holds no rows');
  return { ok: true, progress };
}
