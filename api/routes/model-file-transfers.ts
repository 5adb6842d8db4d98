/**
 * Local weight files into the model registry and out of it, in the official
 * Python CLI's protocol (`tg models upload <model> <dir>`, `tg models download
 * <model> <dir>`):
 *
 *   POST /v2/projects/{p}/models/upload/create    the files (path, MD5 ETag, parts) -> one signed PUT URL per part
 *   PUT  <part url>                               stores the part; its ETag is its MD5 (what the CLI checks)
 *   POST /v2/projects/{p}/models/upload/complete  every part's ETag -> the parts joined into a new revision
 *   POST /v2/projects/{p}/models/download         a revision's files -> one signed ranged GET per 20 MiB
 *
 * A revision is immutable, so an upload makes a new one of exactly the files it names (none is
 * skipped: `skipUpload` is always false). Its weights must be safetensors with a readable header,
 * as for remote uploads; a refused upload leaves nothing stored. Each upload is the workflow
 * `model-file-upload/<id>`, which discards the parts of one not completed in time.
 */
import type { Request, Response } from 'express';
import { getRevision, listRevisionFiles, listRevisions, revisionBlobPrefixInProject } from '../../db/models';
import { DOWNLOAD_PART_BYTES, MODEL_UPLOAD_LIMITS } from '../../shared/model-file-uploads';
import { sendBlob } from '../blob-response';
import { declaredLength } from '../uploads/signed-put';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { BinaryResponse, ProjectParams } from '../schemas/common';
import {
  CompleteModelFileUploadBody,
  CreateModelFileUploadBody,
  ModelDownloadBody,
  ModelDownloadPlanSchema,
  ModelFileUploadCompletedSchema,
  ModelFileUploadPlanSchema,
  ModelUploadPartParams,
  RevisionFileParams,
} from '../schemas/models';
import {
  downloadUrl,
  DownloadUrlQuery,
  partUploadUrl,
  PartUploadUrlQuery,
  verifyDownloadUrl,
  verifyPartUploadUrl,
} from '../uploads/presigned';
import { parseOrThrow } from '../validation';
import { requireOwnModel } from '../use-cases/registry-models';
import { completeModelFileUpload, createModelFileUpload, storeModelFilePart } from '../use-cases/model-file-uploads';

/** How long a download plan's URLs work. */
const DOWNLOAD_TTL_SECONDS = 3600;

const partPath = (uploadId: string, file: number, part: number) =>
  `/v1/model-uploads/${encodeURIComponent(uploadId)}/files/${file}/parts/${part}`;
const revisionFilePath = (revisionId: string, file: number) =>
  `/v1/model-revisions/${encodeURIComponent(revisionId)}/files/${file}`;

export function addModelFileTransferRoutes(v2: ApiRouter, v1: ApiRouter, deps: ApiDeps) {
  const { db, config, blobs } = deps;
  const keyring = () => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    return config.keyring;
  };

  v2.add({
    method: 'post',
    path: '/projects/:projectId/models/upload/create',
    projectScope: 'key',
    operationId: 'createModelFileUpload',
    summary: 'Start an upload of local files into a registered model: one signed PUT URL per part',
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    body: CreateModelFileUploadBody,
    errors: [404, 413],
    response: { status: 200, description: 'Where to PUT each part', schema: ModelFileUploadPlanSchema },
    handler: async ({ body, principal }) => {
      const { id, revisionId, expiresAt, files } = await createModelFileUpload(deps, principal, body);
      const expires = Math.floor(expiresAt.getTime() / 1000);
      return {
        objectId: body.objectId,
        uploadId: id,
        revisionId,
        expiresAt: expiresAt.toISOString(),
        files: files.map((f, index) => ({
          path: f.path,
          uploadId: id,
          skipUpload: false,
          parts: Array.from({ length: f.numParts }, (_, p) => ({
            partNumber: p + 1,
            url: partUploadUrl(
              config.publicUrl,
              keyring(),
              partPath(id, index, p + 1),
              MODEL_UPLOAD_LIMITS.partBytes,
              expires,
            ),
            headers: {},
          })),
        })),
      };
    },
  });

  v1.addSigned(
    {
      method: 'put',
      path: '/model-uploads/:id/files/:file/parts/:part',
      operationId: 'putModelFilePart',
      summary: 'PUT one part of a model file upload to its signed URL; its ETag is its MD5',
      tags: ['models'],
      params: ModelUploadPartParams,
      query: PartUploadUrlQuery,
      errors: [403, 404, 409, 413],
      response: { status: 200, description: 'The stored part (ETag header: its MD5)', schema: BinaryResponse },
    },
    partHandler(deps),
  );

  v2.add({
    method: 'post',
    path: '/projects/:projectId/models/upload/complete',
    projectScope: 'key',
    operationId: 'completeModelFileUpload',
    summary: "Check every part's ETag, join the parts into the model's new revision and validate its weights",
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    body: CompleteModelFileUploadBody,
    errors: [404, 409, 413],
    response: { status: 200, description: 'The new revision', schema: ModelFileUploadCompletedSchema },
    handler: ({ body, principal }) => completeModelFileUpload(deps, principal, body),
  });

  v2.add({
    method: 'post',
    path: '/projects/:projectId/models/download',
    projectScope: 'key',
    operationId: 'planModelDownload',
    summary: "A revision's files (the newest unless revisionId names one): a signed ranged GET per 20 MiB part",
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    body: ModelDownloadBody,
    errors: [404, 413],
    response: { status: 200, description: 'Where to GET each part', schema: ModelDownloadPlanSchema },
    handler: async ({ body, principal }) => {
      const model = await requireOwnModel(db, principal.projectId, body.objectId);
      const revision = body.revisionId
        ? await getRevision(db, model.id, body.revisionId)
        : (await listRevisions(db, model.id))[0];
      if (!revision)
        throw notFound(
          body.revisionId
            ? `Model '${body.objectId}' has no revision '${body.revisionId}'.`
            : `Model '${body.objectId}' has no revision yet.`,
          body.revisionId ? 'revision_not_found' : 'model_has_no_revision',
        );
      const files = await listRevisionFiles(db, revision.id);
      const wanted = body.paths?.length ? body.paths : files.map((f) => f.path);
      const missing = wanted.findIndex((p) => !files.some((f) => f.path === p));
      if (missing >= 0) throw notFound(`Revision '${revision.id}' has no file '${wanted[missing]}'.`, 'file_not_found');
      const expires = Math.floor(Date.now() / 1000) + DOWNLOAD_TTL_SECONDS;
      return {
        objectId: body.objectId,
        revisionId: revision.id,
        expiresAt: new Date(expires * 1000).toISOString(),
        files: files
          .map((f, index) => ({ f, index }))
          .filter(({ f }) => wanted.includes(f.path))
          .map(({ f, index }) => {
            const size = Number(f.size_bytes);
            const url = downloadUrl(
              config.publicUrl,
              keyring(),
              revisionFilePath(revision.id, index),
              principal.apiKeyId,
              expires,
            );
            return {
              path: f.path,
              // What the CLI compares a local copy with: the upload's ETag where the file came from one.
              hash: f.etag ?? `sha256:${f.sha256}`,
              sizeBytes: size,
              parts: Array.from({ length: Math.ceil(size / DOWNLOAD_PART_BYTES) }, (_, p) => {
                const start = p * DOWNLOAD_PART_BYTES;
                const end = Math.min(size, start + DOWNLOAD_PART_BYTES) - 1;
                return {
                  partNumber: p + 1,
                  sizeBytes: end - start + 1,
                  url,
                  headers: { Range: `bytes=${start}-${end}` },
                };
              }),
            };
          }),
      };
    },
  });

  v1.addSigned(
    {
      method: 'get',
      path: '/model-revisions/:id/files/:file',
      operationId: 'getModelRevisionFile',
      summary: "A registry revision's file at its signed URL (from the download plan); answers Range",
      tags: ['models'],
      params: RevisionFileParams,
      query: DownloadUrlQuery,
      errors: [403, 404, 416],
      response: {
        status: 200,
        description: 'The file',
        schema: BinaryResponse,
        mediaType: 'application/octet-stream',
      },
    },
    async (req: Request, res: Response) => {
      const { id, file } = parseOrThrow(RevisionFileParams, req.params, 'path', false);
      const principal = await verifyDownloadUrl(keyring(), db, revisionFilePath(id, file), req.query);
      // The revision of a model of the key's own project, as when the URL was made.
      const prefix = await revisionBlobPrefixInProject(db, id, principal.projectId);
      const f = prefix !== null && (await listRevisionFiles(db, id))[file];
      if (!f) throw notFound(`The file no longer exists (its model or revision was deleted).`);
      await sendBlob(req, res, blobs, {
        key: `${prefix}/${f.path}`,
        size: Number(f.size_bytes),
        filename: f.path.split('/').pop()!,
        contentType: 'application/octet-stream',
      });
    },
  );
}

/** PUT of one part to its signed URL (no API key: the signature is the credential). */
function partHandler(deps: ApiDeps) {
  const { config } = deps;
  return async (req: Request, res: Response) => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    const { id, file, part } = parseOrThrow(ModelUploadPartParams, req.params, 'path', false);
    const maxBytes = verifyPartUploadUrl(config.keyring, partPath(id, file, part), req.query);
    const declared = declaredLength(req, maxBytes);
    const etag = await storeModelFilePart(deps, { id, file, part, declared }, req);
    res.set('ETag', `"${etag}"`).status(200).end();
  };
}
