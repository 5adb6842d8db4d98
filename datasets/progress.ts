import type { RecordsState } from './records';

/**
 * Where a validation stands; saved in Temporal heartbeats so a retried
 * activity continues from here instead of from the first byte.
 */
export interface ValidationProgress {
  /** Byte offset of the first unread line (JSONL, CSV) or the next row group index (Parquet). */
  offset: number;
  /** Number of the last line (or row) fully checked. */
  line: number;
  state: RecordsState;
  /** CSV only: the header, needed to check rows after a resume. */
  header?: string[];
}

export type ValidationOutcome =
  | { ok: true; progress: ValidationProgress }
  | { ok: false; line: number; reason: string; progress: ValidationProgress };

export interface DriverOptions {
  /** Where to continue from (a previous attempt's heartbeat); absent: from the start. */
  resume?: ValidationProgress;
  /** Called with the position after each chunk of work; the activity heartbeats it. */
  onProgress?: (p: ValidationProgress) => void;
  signal?: AbortSignal;
}
