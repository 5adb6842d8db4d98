/**
 * The write paths of multipart uploads (api/routes/file-multipart.ts declares them): initiate (the
 * file and upload rows, the file's workflow, one signed URL per part), store a part (each attempt
 * its own blob; the part it replaces goes), complete (the parts joined in order into the file,
 * then its validation) and abort. Every path that changes both an upload and its file locks the
 * upload first (lockFileForRemoval's order), and a delete racing any of them wins cleanly.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { scheduleBlobDeletions } from '../../db/blob-deletions';
import {
  deleteUnfinishedFile,
  getFileById,
  getMultipartUpload,
  getMultipartUploadForFile,
  insertMultipartUpload,
  listParts,
  markUploaded,
  moveMultipartState,
  recordPart,
  type FileRow,
} from '../../db/files';
import { withTransaction } from '../../db/pool';
import { newId } from '../../platform/ids';
import { deleteScheduledBlobs, discardBlobs } from '../../providers/storage/blob-deletions';
import { BlobTooLargeError } from '../../providers/storage/blob-store';
import { fileValidationWorkflowId } from '../../shared/files';
import { uploadFinishedSignal, uploadStartedSignal } from '../../workflows/files';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, conflict, notFound, payloadTooLarge } from '../errors';
import type { AbortMultipartBody, CompleteMultipartBody, InitiateMultipartBody } from '../schemas/files';
import { uploadUrl } from '../uploads/presigned';
import { requireStorageRoom } from '../uploads/storage-quota';
import { signalWorkflow } from '../workflows';
import { insertAwaitedFile, refuseHeldBytes, startFileWorkflowFor } from './files';

const MAX_PARTS = 10_000;

const partBlobKey = (fileId: string, part: number) => `uploads/${fileId}/part-${String(part).padStart(5, '0')}`;

/** A new multipart upload: its file, its part size and count, and one signed PUT URL per part. */
export async function initiateMultipartUpload(
  deps: ApiDeps,
  principal: Principal,
  body: z.infer<typeof InitiateMultipartBody>,
) {
  const { db, config } = deps;
  if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
  if (body.file_size > config.maxUploadBytes) {
    throw payloadTooLarge(`Files may be at most ${config.maxUploadBytes} bytes.`, 'file_size');
  }
  await refuseHeldBytes(db, principal.projectId, body.checksum);
  await requireStorageRoom(db, config.projectStorageQuotaBytes, principal.projectId, body.file_size, 'file_size');
  const partSize = Math.max(config.multipartPartBytes, Math.ceil(body.file_size / MAX_PARTS));
  const partCount = Math.ceil(body.file_size / partSize);
  const fileId = newId('file');
  const uploadId = newId('mpu');
  const expiresAt = new Date(Date.now() + config.uploadUrlTtlSeconds * 1000);
  const row = await withTransaction(db, async (tx) => {
    const file = await insertAwaitedFile(tx, principal.projectId, fileId, body);
    await insertMultipartUpload(tx, {
      id: uploadId,
      fileId,
      fileSize: body.file_size,
      partSize,
      partCount,
      expiresAt,
    });
    return file;
  });
  // Parts may arrive until the URLs expire; `complete` must come within two TTLs of the first part.
  await startFileWorkflowFor(deps, row, expiresAt, 2 * config.uploadUrlTtlSeconds);
  const expires = Math.floor(expiresAt.getTime() / 1000);
  const parts = Array.from({ length: partCount }, (_, i) => {
    const size = i === partCount - 1 ? body.file_size - partSize * (partCount - 1) : partSize;
    const grant = { fileId, tokenId: uploadId, maxBytes: size, exactBytes: size, expires, part: i + 1 };
    return { part_number: i + 1, size, url: uploadUrl(config.publicUrl, config.keyring!, grant) };
  });
  return { uploadId, fileId, partSize, partCount, expiresAt, parts };
}

const takesNoMoreParts = (uploadId: string, state: string) =>
  new ApiError(
    409,
    `Multipart upload '${uploadId}' is ${state}; it takes no more parts.`,
    'conflict_error',
    null,
    'upload_not_open',
  );

/**
 * Stores one part from its signed URL's request (the route checked the signature and the declared
 * length); answers the stored part. A part sent again replaces the earlier one.
 */
export async function storeMultipartPart(
  { db, temporal, blobs }: Pick<ApiDeps, 'db' | 'temporal' | 'blobs'>,
  p: { fileId: string; part: number; uploadId: string; declared: number },
  bytes: Readable,
) {
  const { fileId, part, declared } = p;
  const upload = await getMultipartUploadForFile(db, fileId, p.uploadId);
  if (!upload) throw notFound(`Multipart upload '${p.uploadId}' no longer exists.`);
  if (upload.state !== 'open') throw takesNoMoreParts(upload.id, upload.state);
  // Each attempt writes its own blob, so a retry never races a slow earlier attempt.
  const key = `${partBlobKey(fileId, part)}-${randomUUID()}`;
  const stored = await blobs.put(key, bytes, { maxBytes: declared });
  if (stored.bytes !== declared) {
    await blobs.delete(key);
    throw badRequest(`The part ended after ${stored.bytes} of ${declared} bytes.`, null, 'incomplete_upload');
  }
  let recorded;
  try {
    recorded = await withTransaction(db, (tx) =>
      recordPart(tx, {
        uploadId: upload.id,
        partNumber: part,
        bytes: stored.bytes,
        sha256: stored.sha256,
        blobKey: key,
      }),
    );
  } catch (err) {
    await blobs.delete(key);
    throw err;
  }
  if (!recorded) {
    // Completed, aborted, discarded or deleted while this part arrived: its blob goes too.
    await discardBlobs(db, blobs, [key]);
    const now = await getMultipartUploadForFile(db, fileId, p.uploadId);
    if (!now) throw notFound(`Multipart upload '${p.uploadId}' no longer exists.`);
    throw takesNoMoreParts(upload.id, now.state);
  }
  // The part sent before this one, whose blob nothing names now.
  if (recorded.replaced) await deleteScheduledBlobs(db, blobs, [recorded.replaced]);
  await signalWorkflow(temporal, fileValidationWorkflowId(fileId), uploadStartedSignal, [], null);
  return stored;
}

/** Joins the stored parts, in the order listed, into the file and starts its validation; answers the file. */
export async function completeMultipartUpload(
  { db, temporal, blobs }: Pick<ApiDeps, 'db' | 'temporal' | 'blobs'>,
  principal: Principal,
  body: z.infer<typeof CompleteMultipartBody>,
): Promise<FileRow> {
  const upload = await getMultipartUpload(db, principal.projectId, body.upload_id);
  if (!upload) throw notFound(`Multipart upload '${body.upload_id}' not found.`);
  const stored = await listParts(db, upload.id);
  const byNumber = new Map(stored.map((p) => [p.part_number, p]));
  try {
    checkListedParts(body.parts, upload.part_count, byNumber);
  } catch (err) {
    // A delete or abort that won a race with this call took the parts away after the upload was
    // read: that is the answer the caller gets, not a complaint about the parts it listed.
    const now = await getMultipartUpload(db, principal.projectId, body.upload_id);
    if (!now) throw notFound(`Multipart upload '${body.upload_id}' not found.`);
    if (now.state !== 'open')
      throw conflict(`Multipart upload '${now.id}' is already ${now.state}.`, 'upload_not_open');
    throw err;
  }
  if (!(await moveMultipartState(db, upload.id, 'open', 'completing'))) {
    throw conflict(`Multipart upload '${upload.id}' is already ${upload.state}.`, 'upload_not_open');
  }
  const file = await getFileById(db, upload.file_id);
  // A delete that won the race between the state move and here took the file (and its upload).
  if (!file) throw notFound(`File '${upload.file_id}' no longer exists; start the upload again.`);
  const joined = Readable.from(
    (async function* () {
      for (const p of stored) yield* blobs.read(p.blob_key, undefined, { chunkBytes: 1 << 20 });
    })(),
  );
  let result;
  try {
    result = await blobs.put(file.blob_key, joined, { maxBytes: Number(upload.file_size) });
    if (result.bytes !== Number(upload.file_size)) {
      await blobs.delete(file.blob_key);
      throw badRequest(
        `The parts hold ${result.bytes} bytes; the upload was declared as ${upload.file_size}.`,
        'parts',
      );
    }
  } catch (err) {
    await moveMultipartState(db, upload.id, 'completing', 'open'); // a retry of complete may succeed
    // A delete that won the race took the parts away while they were being joined.
    if (!(await getMultipartUpload(db, principal.projectId, body.upload_id)) || !(await getFileById(db, file.id))) {
      await discardBlobs(db, blobs, [file.blob_key]);
      throw notFound(`File '${file.id}' no longer exists; start the upload again.`);
    }
    if (err instanceof BlobTooLargeError) throw badRequest('The parts hold more bytes than declared.', 'parts');
    throw err;
  }
  const partKeys = stored.map((p) => p.blob_key);
  const updated = await withTransaction(db, async (tx) => {
    // The upload first, then the file: the order every path that changes both locks them in
    // (lockFileForRemoval). The upload is gone when the file was discarded or deleted meanwhile.
    if (!(await moveMultipartState(tx, upload.id, 'completing', 'completed'))) return null;
    const row = await markUploaded(tx, file.id, result);
    if (row) await scheduleBlobDeletions(tx, partKeys);
    return row;
  });
  if (!updated) {
    // Discarded (its upload outlasted its URLs) or deleted while the parts were joined.
    await discardBlobs(db, blobs, [file.blob_key]);
    throw notFound(`File '${file.id}' no longer exists; start the upload again.`);
  }
  await deleteScheduledBlobs(db, blobs, partKeys);
  try {
    await signalWorkflow(temporal, fileValidationWorkflowId(file.id), uploadFinishedSignal, [{ ok: true }], null);
  } catch (err) {
    // A delete that came right after the join ended the file's validation: the file is gone.
    if (err instanceof WorkflowNotFoundError)
      throw notFound(`File '${file.id}' no longer exists; start the upload again.`);
    throw err;
  }
  return updated;
}

/** Discards an open upload, its parts and its file; answers the upload. */
export async function abortMultipartUpload(
  { db, temporal, blobs }: Pick<ApiDeps, 'db' | 'temporal' | 'blobs'>,
  principal: Principal,
  body: z.infer<typeof AbortMultipartBody>,
) {
  const upload = await getMultipartUpload(db, principal.projectId, body.upload_id);
  if (!upload) throw notFound(`Multipart upload '${body.upload_id}' not found.`);
  const keys = await withTransaction(db, async (tx) => {
    if (!(await moveMultipartState(tx, upload.id, 'open', 'aborted'))) {
      throw conflict(
        `Multipart upload '${upload.id}' is ${upload.state}; only an open upload can be aborted.`,
        'upload_not_open',
      );
    }
    return deleteUnfinishedFile(tx, upload.file_id);
  });
  await deleteScheduledBlobs(db, blobs, keys);
  await signalWorkflow(
    temporal,
    fileValidationWorkflowId(upload.file_id),
    uploadFinishedSignal,
    [{ ok: false, error: 'aborted by the client' }],
    null,
  ).catch(() => undefined);
  return upload;
}

/** Refuses a complete whose listed parts are not, in order, the parts this upload stored. */
function checkListedParts(
  parts: Array<{ part_number: number; etag: string }>,
  partCount: number,
  stored: Map<number, { sha256: string }>,
): void {
  if (parts.length !== partCount) {
    throw badRequest(`This upload has ${partCount} parts; ${parts.length} were listed.`, 'parts');
  }
  parts.forEach((p, i) => {
    if (p.part_number !== i + 1) {
      throw badRequest(
        `List the parts in order: expected part ${i + 1}, found ${p.part_number}.`,
        `parts.${i}.part_number`,
      );
    }
    const have = stored.get(p.part_number);
    if (!have) throw badRequest(`Part ${p.part_number} was never uploaded.`, `parts.${i}`, 'part_missing');
    if (have.sha256 !== p.etag.replace(/"/g, '')) {
      throw badRequest(
        `Part ${p.part_number}'s ETag does not match the part Gantry stored; upload it again.`,
        `parts.${i}.etag`,
        'etag_mismatch',
      );
    }
  });
}
