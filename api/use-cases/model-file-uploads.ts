/**
 * The write paths of local weight-file uploads into the model registry (the official Python
 * CLI's `tg models upload`; the routes are api/routes/model-file-transfers.ts): creating an
 * upload (its files checked, its row, then its workflow `model-file-upload/<id>`, which discards
 * the parts of one not completed in time; the row goes again if the workflow cannot start), and
 * completing one (every part's ETag checked, the parts joined into the model's new revision, its
 * weights validated; a refused upload leaves nothing stored).
 */
import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { insertRevision } from '../../db/models';
import {
  dropUploadLeftovers,
  getModelFileUpload,
  insertModelFileUpload,
  listUploadFiles,
  listUploadParts,
  moveModelFileUpload,
  recordUploadPart,
  beginCompletingModelFileUpload,
  renewCompletingModelFileUpload,
  COMPLETING_LEASE_SECONDS,
  type ModelFileUploadRow,
} from '../../db/model-file-uploads';
import { withTransaction } from '../../db/pool';
import { newId } from '../../platform/ids';
import { deleteScheduledBlobs } from '../../providers/storage/blob-deletions';
import { assertSafeKey } from '../../providers/storage/blob-store';
import { checkRevisionWeights } from '../../providers/trainer/safetensors';
import { modelFileUploadWorkflowId, revisionBlobPrefix } from '../../shared/model-file-uploads';
import { modelFilesFinishedSignal, modelFileUpload } from '../../workflows/model-file-uploads';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, conflict, notFound, payloadTooLarge } from '../errors';
import { storeSignedPut } from '../uploads/signed-put';
import { requireStorageRoom } from '../uploads/storage-quota';
import type { CompleteModelFileUploadBody, CreateModelFileUploadBody } from '../schemas/models';
import { signalWorkflow, startResourceWorkflowOrUndo } from '../workflows';
import { requireOwnModel } from './registry-models';

type Deps = Pick<ApiDeps, 'db' | 'temporal' | 'config' | 'blobs'>;

const unquote = (etag: string) => etag.replace(/"/g, '').toLowerCase();

/** The S3-style ETag of a file sent in parts: one part's MD5, else the MD5 of the parts' MD5s, `-<parts>`. */
export function multipartEtag(partMd5s: string[]): string {
  if (partMd5s.length === 1) return partMd5s[0];
  const joined = Buffer.concat(partMd5s.map((m) => Buffer.from(m, 'hex')));
  return `${createHash('md5').update(joined).digest('hex')}-${partMd5s.length}`;
}

/** Creates an upload of the files `body` names into its model and starts its workflow. */
export async function createModelFileUpload(
  deps: Deps,
  principal: Principal,
  body: z.infer<typeof CreateModelFileUploadBody>,
) {
  const { db, temporal, config } = deps;
  const model = await requireOwnModel(db, principal.projectId, body.objectId);
  const seen = new Set<string>();
  body.files.forEach((f, i) => {
    try {
      assertSafeKey(f.path);
    } catch {
      throw badRequest(
        `'${f.path}' is not a plain relative path (segments of letters, digits, '.', '_' and '-', none starting with '.').`,
        `files.${i}.path`,
      );
    }
    if (seen.has(f.path)) throw badRequest(`'${f.path}' is listed twice.`, `files.${i}.path`);
    seen.add(f.path);
    const suffix = /-(\d+)"?$/.exec(f.hash)?.[1];
    if (f.numParts > 1 ? Number(suffix) !== f.numParts : suffix !== undefined)
      throw badRequest(
        `The ETag of a file in ${f.numParts} part(s) ${f.numParts > 1 ? `ends in -${f.numParts}` : 'has no -<parts> suffix'}.`,
        `files.${i}.hash`,
      );
  });
  const id = newId('mfu');
  const revisionId = 'rv_' + createHash('sha256').update(id).digest('hex').slice(0, 24);
  const expiresAt = new Date(Date.now() + config.uploadUrlTtlSeconds * 1000);
  const files = [...body.files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  await insertModelFileUpload(db, {
    id,
    projectId: principal.projectId,
    modelId: model.id,
    revisionId,
    expiresAt,
    files: files.map((f) => ({ path: f.path, etag: unquote(f.hash), partCount: f.numParts })),
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: modelFileUpload,
      workflowId: modelFileUploadWorkflowId(id),
      args: [
        {
          uploadId: id,
          modelId: model.id,
          expiresAt: expiresAt.toISOString(),
          graceSeconds: config.uploadUrlTtlSeconds,
        },
      ],
      projectId: principal.projectId,
      resourceType: 'model-file-upload',
      resourceId: id,
      status: 'OPEN',
      summary: `Upload of ${files.length} local file(s) into ${model.id}`,
      details: `Becomes revision \`${revisionId}\` when completed.`,
    },
    () => db.query('DELETE FROM model_file_uploads WHERE id = $1', [id]),
  );
  return { id, revisionId, expiresAt, files };
}

/** Completes an open upload: its parts checked and joined into the model's new revision. */
export async function completeModelFileUpload(
  deps: Deps,
  principal: Principal,
  body: z.infer<typeof CompleteModelFileUploadBody>,
) {
  const { db, temporal, blobs } = deps;
  /** Joins each file's parts into the revision, validates it, and records it; or refuses it, leaving nothing. */
  async function complete(
    upload: ModelFileUploadRow,
    planned: Awaited<ReturnType<typeof listUploadFiles>>,
    parts: Awaited<ReturnType<typeof listUploadParts>>,
  ) {
    const prefix = revisionBlobPrefix(upload.model_id, upload.revision_id);
    const stored: Array<{ path: string; bytes: number; sha256: string; etag: string }> = [];
    try {
      for (const f of planned) {
        const own = parts.filter((p) => p.path === f.path);
        const joined = Readable.from(
          (async function* () {
            for (const p of own) yield* blobs.read(p.blob_key, undefined, { chunkBytes: 1 << 20 });
          })(),
        );
        const total = own.reduce((n, p) => n + Number(p.bytes), 0);
        const blob = await blobs.put(`${prefix}/${f.path}`, joined, { maxBytes: total });
        stored.push({ path: f.path, ...blob, etag: f.etag });
      }
    } catch (err) {
      // The next `complete` may succeed: the parts are still there.
      await moveModelFileUpload(db, upload.id, 'completing', 'open');
      throw err;
    }
    const { parameters, errors } = await checkRevisionWeights(
      blobs,
      prefix,
      stored.map((f) => f.path),
    );
    if (errors.length) {
      await moveModelFileUpload(db, upload.id, 'completing', 'failed');
      await discardLeftovers(upload);
      await finished(upload.id, 'FAILED');
      throw badRequest(
        `The files are not a usable model, so no revision was made: ${errors.join('; ')}.`,
        'files',
        'upload_invalid',
      );
    }
    await withTransaction(db, async (tx) => {
      await insertRevision(tx, {
        id: upload.revision_id,
        modelId: upload.model_id,
        blobPrefix: prefix,
        files: stored,
        validationStatus: 'REVISION_VALIDATION_STATUS_SUCCESS',
      });
      await tx.query('UPDATE registry_models SET parameters_total = $2, updated_at = now() WHERE id = $1', [
        upload.model_id,
        parameters,
      ]);
      await moveModelFileUpload(tx, upload.id, 'completing', 'completed');
    });
    await discardLeftovers(upload);
    await finished(upload.id, 'COMPLETED');
    return {
      objectId: upload.model_id,
      revisionId: upload.revision_id,
      files: stored.length,
      bytes: stored.reduce((n, f) => n + f.bytes, 0),
    };
  }

  /** Removes the parts of an upload that ended, and the revision files no revision holds. */
  async function discardLeftovers(upload: ModelFileUploadRow) {
    await deleteScheduledBlobs(db, blobs, await dropUploadLeftovers(db, upload));
  }

  /**
   * Tells the upload's run it ended (it would otherwise wait until its timer and find it ended). A
   * run whose timer fired meanwhile has read the end from the row and closed: nothing to tell.
   */
  const finished = (uploadId: string, status: 'COMPLETED' | 'FAILED') =>
    signalWorkflow(temporal, modelFileUploadWorkflowId(uploadId), modelFilesFinishedSignal, [{ status }], null).catch(
      (err: unknown) => {
        if (!(err instanceof WorkflowNotFoundError)) throw err;
      },
    );

  const model = await requireOwnModel(db, principal.projectId, body.objectId);
  const ids = new Set(body.files.map((f) => f.uploadDetails?.uploadId).filter((x) => x !== undefined));
  if (ids.size !== 1)
    throw badRequest('Name the upload: every file carries the uploadId that create answered.', 'files');
  const [uploadId] = ids;
  const upload = await getModelFileUpload(db, uploadId, principal.projectId);
  if (!upload || upload.model_id !== model.id)
    throw notFound(`Upload '${uploadId}' of model '${body.objectId}' not found.`);
  // (A completing one may be an earlier `complete` that died: checked when this one begins.)
  if (upload.state !== 'open' && upload.state !== 'completing')
    throw conflict(
      `Upload '${upload.id}' is ${upload.state}; only an open upload can be completed.`,
      'upload_not_open',
    );
  const planned = await listUploadFiles(db, upload.id);
  const parts = await listUploadParts(db, upload.id);
  if (body.files.length !== planned.length)
    throw badRequest(`This upload has ${planned.length} file(s); ${body.files.length} were listed.`, 'files');
  body.files.forEach((f, i) => {
    const plan = planned.find((p) => p.path === f.path);
    if (!plan) throw badRequest(`'${f.path}' is not a file of this upload.`, `files.${i}.path`);
    if (f.skipUpload || !f.uploadDetails)
      throw badRequest(`'${f.path}' was not skipped: list its parts.`, `files.${i}.uploadDetails`);
    const listed = f.uploadDetails.parts;
    if (listed.length !== plan.part_count)
      throw badRequest(`'${f.path}' has ${plan.part_count} part(s); ${listed.length} were listed.`, `files.${i}`);
    const stored = parts.filter((p) => p.path === f.path);
    listed.forEach((p, j) => {
      if (p.partNumber !== j + 1)
        throw badRequest(`List the parts in order: expected part ${j + 1}.`, `files.${i}.uploadDetails.parts.${j}`);
      const have = stored.find((s) => s.part_number === p.partNumber);
      if (!have)
        throw badRequest(
          `Part ${p.partNumber} of '${f.path}' was never uploaded.`,
          `files.${i}.uploadDetails.parts.${j}`,
          'part_missing',
        );
      if (have.md5 !== unquote(p.hash))
        throw badRequest(
          `Part ${p.partNumber} of '${f.path}': its ETag does not match the part Gantry stored; upload it again.`,
          `files.${i}.uploadDetails.parts.${j}.hash`,
          'etag_mismatch',
        );
    });
    const etag = multipartEtag(stored.map((s) => s.md5));
    if (etag !== plan.etag || etag !== unquote(f.hash))
      throw badRequest(
        `The parts of '${f.path}' make the ETag ${etag}; the file's is ${plan.etag}: a part changed, upload it again.`,
        `files.${i}.hash`,
        'etag_mismatch',
      );
  });
  // A `complete` that died mid-way (its API process went) leaves the upload completing: once its
  // hold lapses, the client's retry takes it over instead of meeting a 409 until it expires.
  if (!(await beginCompletingModelFileUpload(db, upload.id)))
    throw conflict(
      `Upload '${upload.id}' is being completed by another request, or was just completed; wait for it to end.`,
      'upload_not_open',
    );
  const hold = setInterval(
    () => void renewCompletingModelFileUpload(db, upload.id).catch(() => undefined),
    (COMPLETING_LEASE_SECONDS * 1000) / 3,
  );
  try {
    return await complete(upload, planned, parts);
  } finally {
    clearInterval(hold);
  }
}

/**
 * Stores one part of a file of a model upload from its signed PUT (the route checked the signature
 * and the declared length): within the upload's byte limit and the project's storage quota, each
 * attempt its own blob (the part it replaces goes). Answers the part's MD5, its ETag.
 */
export async function storeModelFilePart(
  { db, config, blobs }: Pick<ApiDeps, 'db' | 'config' | 'blobs'>,
  p: { id: string; file: number; part: number; declared: number },
  bytes: Readable,
): Promise<string> {
  const { id, file, part, declared } = p;
  const upload = await getModelFileUpload(db, id);
  if (!upload) throw notFound(`Upload '${id}' no longer exists.`);
  const planned = (await listUploadFiles(db, id))[file];
  if (!planned || part > planned.part_count) throw notFound(`Upload '${id}' has no such part.`);
  const notOpen = () =>
    new ApiError(
      409,
      `Upload '${id}' is ${upload.state}; it takes no more parts.`,
      'conflict_error',
      null,
      'upload_not_open',
    );
  if (upload.state !== 'open') throw notOpen();
  const held = (await listUploadParts(db, id)).reduce((n, p) => n + Number(p.bytes), 0);
  if (held + declared > config.remoteFetch.maxBytes)
    throw payloadTooLarge(`A model upload may hold at most ${config.remoteFetch.maxBytes} bytes.`, 'Content-Length');
  await requireStorageRoom(db, config.projectStorageQuotaBytes, upload.project_id, declared, 'Content-Length');
  // Each attempt writes its own blob, so a retry never races a slow earlier attempt.
  const key = `model-uploads/${id}/${file}/part-${String(part).padStart(5, '0')}-${randomUUID()}`;
  const etag = await storeSignedPut(blobs, bytes, key, declared);
  const recorded = await withTransaction(db, (tx) =>
    recordUploadPart(tx, {
      uploadId: id,
      path: planned.path,
      partNumber: part,
      bytes: declared,
      md5: etag,
      blobKey: key,
    }),
  );
  if (!recorded) {
    // The upload was completed, refused or discarded while this part arrived.
    await blobs.delete(key);
    throw notOpen();
  }
  if (recorded.replaced) await deleteScheduledBlobs(db, blobs, [recorded.replaced]);
  return etag;
}
