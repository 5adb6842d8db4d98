/** What both file route modules need: the file object, type inference, the workflow start. */
import path from 'node:path';
import { FILE_RESOURCE_TYPE, fileValidationWorkflowId, type FileType } from '../../shared/files';
import { deleteFileRow, findFileByChecksum, type FileRow } from '../../db/files';
import type { Queryable } from '../../db/pool';
import { fileValidation, type FileWorkflowInput } from '../../workflows/files';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, type ErrorBody } from '../errors';
import { startResourceWorkflowOrUndo } from '../workflows';

/** 409 with the existing file's id at the top level, where the official SDKs read it (`file_id`). */
export class FileExistsError extends ApiError {
  constructor(readonly fileId: string) {
    super(
      409,
      `This project already holds these bytes as file '${fileId}'.`,
      'conflict_error',
      'checksum',
      'file_exists',
    );
  }
  override toBody(): ErrorBody & { file_id: string } {
    return { ...super.toBody(), file_id: this.fileId };
  }
}

/** Before an upload starts: refuses bytes (by their SHA-256) that the project already holds. */
export async function refuseHeldBytes(db: Queryable, projectId: string, checksum: string | undefined): Promise<void> {
  if (checksum === undefined) return;
  const existing = await findFileByChecksum(db, projectId, checksum);
  if (existing) throw new FileExistsError(existing);
}

export function inferFileType(fileName: string, given: FileType | undefined): FileType {
  if (given) return given;
  const ext = path.extname(fileName).slice(1).toLowerCase();
  if (ext === 'jsonl' || ext === 'csv' || ext === 'parquet') return ext;
  throw badRequest(
    `Cannot tell the file type from '${fileName}': set file_type to jsonl, csv or parquet.`,
    'file_type',
    'invalid_value',
  );
}

/**
 * Starts the file's workflow (`file-validation/<file-id>`) with the ids,
 * search attributes and summary operators look for. For uploads still to
 * come, `awaitUploadUntil` is when their URLs expire and `uploadTimeoutSeconds`
 * how long a started upload may take to finish. If the workflow cannot be
 * started, the file's row is deleted (nothing dangles) and the error rethrown.
 */
export async function startFileWorkflowFor(
  deps: Pick<ApiDeps, 'temporal' | 'config' | 'db'>,
  row: FileRow,
  awaitUploadUntil?: Date,
  uploadTimeoutSeconds?: number,
): Promise<void> {
  const { temporal, config, db } = deps;
  const input: FileWorkflowInput = {
    fileId: row.id,
    projectId: row.project_id,
    purpose: row.purpose,
    heartbeatTimeoutSeconds: config.validationHeartbeatTimeoutSeconds,
    ...(awaitUploadUntil ? { awaitUploadUntil: awaitUploadUntil.toISOString() } : {}),
    ...(uploadTimeoutSeconds ? { uploadTimeoutSeconds } : {}),
  };
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: fileValidation,
      workflowId: fileValidationWorkflowId(row.id),
      args: [input],
      projectId: row.project_id,
      resourceType: FILE_RESOURCE_TYPE,
      resourceId: row.id,
      status: row.processing_status,
      summary: `File ${row.id}: ${row.purpose} ${row.file_type}`,
      details: `\`${row.filename}\` (${row.bytes ?? 'awaiting upload'} bytes)`,
    },
    () => deleteFileRow(db, row.id),
  );
}
