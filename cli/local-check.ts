/**
 * `gantry files check`: a local file checked with the server's own rules
 * before any byte is sent. The file name rule is the API's schema
 * (api/schemas/files.ts), and the dataset rules are the validator the
 * file-validation activity runs (datasets/validate.ts), so a file that passes
 * here passes there, and a file that fails names the same line and reason.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { FileName } from '../api/schemas/files';
import {
  FILE_TYPES,
  purposeNeedsValidation,
  type FilePurpose,
  type FileType,
  type ValidationReport,
} from '../shared/files';
import { buildReport } from '../datasets/report';
import { validateDataset } from '../datasets/validate';
import { usageError } from './errors';

/** The spec's limit on fine-tuning files, and the server's default upload limit. */
export const MAX_FILE_BYTES = 25 * 1024 ** 3;

export interface LocalFile {
  path: string;
  fileName: string;
  size: number;
  fileType: FileType;
}

/** The file's type as the server infers it: `--file-type`, else the extension. */
export function fileTypeOf(fileName: string, given?: string): FileType {
  if (given) {
    if (!(FILE_TYPES as readonly string[]).includes(given)) {
      throw usageError(`--file-type must be one of ${FILE_TYPES.join(', ')}.`);
    }
    return given as FileType;
  }
  const ext = path.extname(fileName).slice(1).toLowerCase();
  if ((FILE_TYPES as readonly string[]).includes(ext)) return ext as FileType;
  throw usageError(`Cannot tell the file type from '${fileName}': pass --file-type jsonl, csv or parquet.`);
}

/** A local file that can be uploaded: it exists, its name and size are allowed, its type is known. */
export async function localFile(filePath: string, opts: { fileName?: string; fileType?: string } = {}) {
  const info = await stat(filePath).catch(() => null);
  if (!info) throw usageError(`No such file: ${filePath}`);
  if (!info.isFile()) throw usageError(`Not a regular file: ${filePath}`);
  const fileName = opts.fileName ?? path.basename(filePath);
  const name = FileName.safeParse(fileName);
  if (!name.success) throw usageError(`The file name '${fileName}' ${name.error.issues[0].message}.`);
  if (info.size > MAX_FILE_BYTES) {
    throw usageError(`${filePath} is ${info.size} bytes; files may be at most ${MAX_FILE_BYTES} bytes (25 GiB).`);
  }
  return { path: filePath, fileName, size: info.size, fileType: fileTypeOf(fileName, opts.fileType) } as LocalFile;
}

/**
 * The validation report the server would write for this file and purpose;
 * null for purposes the server does not validate (calibration, batch-api).
 */
export async function checkLocalFile(file: LocalFile, purpose: FilePurpose): Promise<ValidationReport | null> {
  if (!purposeNeedsValidation(purpose)) return null;
  const outcome = await validateDataset(file.fileType, purpose, {
    read: (start) => createReadStream(file.path, { start, highWaterMark: 1024 * 1024 }),
    path: () => file.path,
    size: file.size,
  });
  return buildReport(`(local) ${file.fileName}`, file.fileType, outcome);
}
