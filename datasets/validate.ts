/**
 * Which driver validates a file, by its type and purpose: the one set of rules
 * both the file-validation activity (a blob) and the command-line tool's
 * `gantry files check` (a local file) apply.
 */
import type { Readable } from 'node:stream';
import type { FilePurpose, FileType } from '../shared/files';
import { validateCsv } from './csv';
import { validateJsonl } from './jsonl';
import { validateParquet } from './parquet';
import type { ValidationOutcome, ValidationProgress } from './progress';
import { initialRecordsState } from './records';

export interface DatasetSource {
  /** The bytes from `start` (a resumed validation continues from its heartbeat's offset). */
  read: (start: number) => Readable;
  /** A local path of the whole file (Parquet is read by random access). */
  path: () => string;
  size: number;
  resume?: ValidationProgress;
  onProgress?: (p: ValidationProgress) => void;
  signal?: AbortSignal;
}

export async function validateDataset(
  fileType: FileType,
  purpose: FilePurpose,
  io: DatasetSource,
): Promise<ValidationOutcome> {
  const datasetPurpose = purpose === 'eval' ? 'eval' : 'fine-tune';
  const opts = { resume: io.resume, onProgress: io.onProgress, signal: io.signal };
  switch (fileType) {
    case 'jsonl':
      return validateJsonl(io.read(io.resume?.offset ?? 0), datasetPurpose, opts);
    case 'csv':
      if (datasetPurpose === 'fine-tune') {
        return {
          ok: false,
          line: 1,
          reason: 'CSV files are not supported for fine-tuning; upload JSONL or Parquet',
          progress: { offset: 0, line: 0, state: initialRecordsState() },
        };
      }
      return validateCsv(io.read(io.resume?.offset ?? 0), opts);
    case 'parquet':
      return validateParquet(io.path(), datasetPurpose, { ...opts, fileBytes: io.size });
    default:
      throw new UnknownFileTypeError(fileType);
  }
}

export class UnknownFileTypeError extends Error {
  constructor(readonly fileType: string) {
    super(`unknown file type ${fileType}`);
    this.name = 'UnknownFileTypeError';
  }
}
