/**
 * The write paths of files: an upload through the API, the SDKs' signed upload (started, then
 * its PUT received), and a delete; and what the multipart paths share with them (type
 * inference, refusing bytes the project already holds, the file's workflow start).
 */
import path from 'node:path';
import { FILE_RESOURCE_TYPE, fileValidationWorkflowId, type FileType } from '../../shared/files';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import {
  consumeUploadToken,
  deleteFileRow,
  fileLeaseHolders,
  findFileByChecksum,
  getFileById,
  insertFile,
  insertUploadToken,
  lockFileForRemoval,
  markUploaded,
  removeLockedFile,
  type FileRow,
} from '../../db/files';
import { withTransaction } from '../../db/pool';
import { newId } from '../../platform/ids';
import { deleteScheduledBlobs, discardBlobs } from '../../providers/storage/blob-deletions';
import { BlobTooLargeError } from '../../providers/storage/blob-store';
import { uploadFinishedSignal, uploadStartedSignal } from '../../workflows/files';
import type { CreateFileUploadBody, UploadFileFields } from '../schemas/files';
import { fileBlobKey, type StoredUpload } from '../uploads/blob-storage-engine';
import { uploadUrl } from '../uploads/presigned';
import { requireStorageRoom } from '../uploads/storage-quota';
import { signalWorkflow } from '../workflows';
import type { Queryable } from '../../db/pool';
import { fileValidation, type FileWorkflowInput } from '../../workflows/files';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, conflict, notFound, payloadTooLarge, type ErrorBody } from '../errors';
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

/** The row of a file whose bytes are still to come (a signed or multipart upload), its type inferred. */
export function insertAwaitedFile(
  q: Queryable,
  projectId: string,
  fileId: string,
  body: { file_name: string; purpose: FileRow['purpose']; file_type?: FileType },
): Promise<FileRow> {
  return insertFile(q, {
    id: fileId,
    projectId,
    filename: body.file_name,
    purpose: body.purpose,
    fileType: inferFileType(body.file_name, body.file_type),
    blobKey: fileBlobKey(projectId, fileId),
  });
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

/** Records a file whose bytes the upload stored, and starts its validation (its row goes again if that fails). */
export async function recordUploadedFile(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  body: z.infer<typeof UploadFileFields>,
  stored: StoredUpload,
): Promise<FileRow> {
  const { db, config } = deps;
  await requireStorageRoom(db, config.projectStorageQuotaBytes, principal.projectId, stored.size, 'file');
  const row = await insertFile(db, {
    id: stored.fileId,
    projectId: principal.projectId,
    filename: body.file_name,
    purpose: body.purpose,
    fileType: inferFileType(body.file_name, body.file_type),
    blobKey: stored.blobKey,
    stored: { bytes: stored.size, sha256: stored.sha256 },
  });
  await startFileWorkflowFor(deps, row); // on failure the row is gone; the route's cleanup removes the blob
  return row;
}

/**
 * The SDKs' upload flow: the file's row, a single-use upload token and the file's workflow, which
 * waits for the bytes until the URL expires; answers the row and the signed URL to PUT them to.
 */
export async function startSignedUpload(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  body: z.infer<typeof CreateFileUploadBody>,
): Promise<{ row: FileRow; url: string }> {
  const { db, config } = deps;
  if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
  if (body.bytes !== undefined && body.bytes > config.maxUploadBytes) {
    throw payloadTooLarge(`Files may be at most ${config.maxUploadBytes} bytes.`, 'bytes');
  }
  if (body.bytes !== undefined && body.bytes > config.maxSinglePutBytes) {
    throw badRequest(
      `Files above ${config.maxSinglePutBytes} bytes are uploaded in parts: use POST /v1/files/multipart/initiate.`,
      'bytes',
      'use_multipart',
    );
  }
  await refuseHeldBytes(db, principal.projectId, body.checksum);
  // Checked here with the declared size, and again at the PUT with its Content-Length.
  if (body.bytes !== undefined) {
    await requireStorageRoom(db, config.projectStorageQuotaBytes, principal.projectId, body.bytes, 'bytes');
  }
  const fileId = newId('file');
  const expiresAt = new Date(Date.now() + config.uploadUrlTtlSeconds * 1000);
  const row = await insertAwaitedFile(db, principal.projectId, fileId, body);
  const grant = {
    fileId,
    tokenId: randomBytes(16).toString('base64url'),
    maxBytes: body.bytes ?? Math.min(config.maxUploadBytes, config.maxSinglePutBytes),
    exactBytes: body.bytes ?? null,
    expires: Math.floor(expiresAt.getTime() / 1000),
  };
  await insertUploadToken(db, {
    id: grant.tokenId,
    fileId,
    maxBytes: grant.maxBytes,
    exactBytes: grant.exactBytes,
    expiresAt,
  });
  await startFileWorkflowFor(deps, row, expiresAt);
  return { row, url: uploadUrl(config.publicUrl, config.keyring, grant) };
}

/**
 * Receives the bytes PUT to a signed upload URL (the route checked the signature and the declared
 * length): the token is used once, the bytes are stored, and the file's workflow hears of the
 * upload's start and end. Answers the uploaded file.
 */
export async function receiveSignedUpload(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config' | 'blobs'>,
  p: { fileId: string; tokenId: string; exactBytes: number | null; declared: number },
  bytes: Readable,
): Promise<FileRow> {
  const { db, temporal, config, blobs } = deps;
  const { fileId, declared } = p;
  const owner = await getFileById(db, fileId);
  if (owner)
    await requireStorageRoom(db, config.projectStorageQuotaBytes, owner.project_id, declared, 'Content-Length');
  if (p.exactBytes !== null && declared !== p.exactBytes) {
    throw badRequest(
      `This upload URL is for exactly ${p.exactBytes} bytes; the request declares ${declared}.`,
      'Content-Length',
      'size_mismatch',
    );
  }
  // Single use: the first PUT consumes the token, any later one (a replay) is refused.
  const token = await consumeUploadToken(db, p.tokenId, fileId);
  if (!token) {
    throw new ApiError(
      403,
      'This upload URL was already used or has expired.',
      'permission_error',
      null,
      'upload_url_used',
    );
  }
  const row = await getFileById(db, fileId);
  if (!row) throw notFound(`File '${fileId}' no longer exists; start the upload again.`);
  const workflowId = fileValidationWorkflowId(fileId);
  await signalWorkflow(temporal, workflowId, uploadStartedSignal, [], null);
  let stored;
  try {
    stored = await blobs.put(row.blob_key, bytes, { maxBytes: declared });
    if (stored.bytes !== declared) {
      await blobs.delete(row.blob_key);
      throw badRequest(`The upload ended after ${stored.bytes} of ${declared} bytes.`, null, 'incomplete_upload');
    }
  } catch (err) {
    await signalWorkflow(
      temporal,
      workflowId,
      uploadFinishedSignal,
      [{ ok: false, error: (err as Error).message }],
      null,
    ).catch(() => undefined);
    if (err instanceof BlobTooLargeError)
      throw payloadTooLarge(`The upload is larger than the declared ${declared} bytes.`);
    throw err;
  }
  const updated = await markUploaded(db, fileId, stored);
  if (!updated) {
    // Discarded (its upload took too long) or deleted while the bytes arrived.
    await discardBlobs(db, blobs, [row.blob_key]);
    throw notFound(`File '${fileId}' no longer exists; start the upload again.`);
  }
  await signalWorkflow(temporal, workflowId, uploadFinishedSignal, [{ ok: true }], null);
  return updated;
}

/**
 * Deletes a file no job or volume holds: its validation is stopped first, so no activity reads a
 * blob that is going away; the blobs' keys are recorded with the row's delete.
 */
export async function deleteFile({ db, temporal, blobs }: Pick<ApiDeps, 'db' | 'temporal' | 'blobs'>, row: FileRow) {
  const refuseIfLeased = async (q: Queryable) => {
    const holders = await fileLeaseHolders(q, row.id);
    if (holders.length) {
      throw conflict(
        `File '${row.id}' is in use by ${holders.join(', ')}. Delete it once they let go of it: a job when it finishes or is cancelled, a deployment volume when the volume is deleted.`,
        'file_in_use',
      );
    }
  };
  await refuseIfLeased(db);
  // Stop validation first, so no activity reads a blob that is going away.
  try {
    await temporal.workflow.getHandle(fileValidationWorkflowId(row.id)).cancel();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
  // Checked again under the row lock: a job created meanwhile leases the file through a
  // foreign key, which waits on this lock, so exactly one of the two wins.
  // The parts of an unfinished multipart upload are blobs of their own; their rows go with the file's.
  // The blobs' keys are recorded with the row's delete: storage failing now, or this process
  // ending, leaves them to the control worker's blob deletion rounds.
  const keys = await withTransaction(db, async (tx) => {
    if (!(await lockFileForRemoval(tx, row.id))) return []; // another delete won
    await refuseIfLeased(tx);
    return removeLockedFile(tx, row);
  });
  await deleteScheduledBlobs(db, blobs, keys);
}
