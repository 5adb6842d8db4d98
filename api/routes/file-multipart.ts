/**
 * Multipart uploads for large files (spec: Files; the single pre-signed PUT
 * takes at most GANTRY_MAX_SINGLE_PUT_BYTES, 5 GiB by default):
 *
 *   POST /v1/files/multipart/initiate  -> a file id, a part size, one signed PUT URL per part
 *   PUT  <part url>                    -> stores the part; returns its ETag (SHA-256); may be retried
 *   POST /v1/files/multipart/complete  -> joins the parts in order, checks every ETag, starts validation
 *   POST /v1/files/multipart/abort     -> discards the parts and the file
 *
 * Parts that are never completed are discarded by the file's workflow when
 * its timer runs out, like any upload that does not finish.
 */
import type { Request, Response } from 'express';
import type { ApiDeps } from '../deps';
import { badRequest } from '../errors';
import type { ApiRouter } from '../route';
import {
  AbortMultipartBody,
  CompleteMultipartBody,
  FileObjectSchema,
  InitiateMultipartBody,
  MultipartAbortedSchema,
  MultipartUploadSchema,
  PartParams,
  PartUploadedSchema,
} from '../schemas/files';
import { UploadUrlQuery, verifyUploadUrl } from '../uploads/presigned';
import { parseOrThrow } from '../validation';
import { toAbortedUpload, toFileObject, toMultipartUpload } from '../presenters/files';
import {
  abortMultipartUpload,
  completeMultipartUpload,
  initiateMultipartUpload,
  storeMultipartPart,
} from '../use-cases/file-multipart';

export function addMultipartRoutes(router: ApiRouter, deps: ApiDeps) {
  router.add({
    method: 'post',
    path: '/files/multipart/initiate',
    operationId: 'initiateMultipartUpload',
    summary: 'Start a multipart upload: one signed PUT URL per part',
    tags: ['files'],
    body: InitiateMultipartBody,
    strict: true,
    errors: [409, 413, 503],
    response: { status: 200, description: 'The upload and its part URLs', schema: MultipartUploadSchema },
    handler: async ({ body, principal }) => {
      return toMultipartUpload(await initiateMultipartUpload(deps, principal, body));
    },
  });

  router.addSigned(
    {
      method: 'put',
      path: '/files/:id/parts/:part',
      operationId: 'putFilePart',
      summary: 'PUT one part of a multipart upload to its signed URL; returns its ETag',
      tags: ['files'],
      params: PartParams,
      query: UploadUrlQuery,
      errors: [403, 404, 409],
      response: { status: 200, description: 'The stored part', schema: PartUploadedSchema },
    },
    multipartPartHandler(deps),
  );

  router.add({
    method: 'post',
    path: '/files/multipart/complete',
    operationId: 'completeMultipartUpload',
    summary: 'Join the uploaded parts into the file and start its validation',
    tags: ['files'],
    body: CompleteMultipartBody,
    strict: true,
    errors: [404, 409, 503],
    response: { status: 200, description: 'The file, processing_status PENDING', schema: FileObjectSchema },
    handler: async ({ body, principal }) => {
      return toFileObject(await completeMultipartUpload(deps, principal, body));
    },
  });

  router.add({
    method: 'post',
    path: '/files/multipart/abort',
    operationId: 'abortMultipartUpload',
    summary: 'Discard a multipart upload, its parts and its file',
    tags: ['files'],
    body: AbortMultipartBody,
    strict: true,
    errors: [404, 409],
    response: { status: 200, description: 'Aborted', schema: MultipartAbortedSchema },
    handler: async ({ body, principal }) => {
      return toAbortedUpload(await abortMultipartUpload(deps, principal, body));
    },
  });
}

/** PUT of one part to its signed URL (no API key: the signature is the credential). */
function multipartPartHandler(deps: ApiDeps) {
  const { config } = deps;
  return async (req: Request, res: Response) => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    const { id: fileId, part } = parseOrThrow(PartParams, req.params, 'path', false);
    const grant = verifyUploadUrl(config.keyring, fileId, req.query, part);
    const declared = Number(req.headers['content-length']);
    if (!req.headers['content-length'] || !Number.isSafeInteger(declared)) {
      throw badRequest('Send the part with a Content-Length header.', 'Content-Length', 'length_required');
    }
    if (declared !== grant.exactBytes) {
      throw badRequest(
        `Part ${part} must be exactly ${grant.exactBytes} bytes; the request declares ${declared}.`,
        'Content-Length',
        'size_mismatch',
      );
    }
    const stored = await storeMultipartPart(deps, { fileId, part, uploadId: grant.tokenId, declared }, req);
    res
      .set('ETag', `"${stored.sha256}"`)
      .status(200)
      .json({ part_number: part, size: stored.bytes, etag: stored.sha256 });
  };
}
