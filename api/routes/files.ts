/**
 * Files (spec: Files; the official SDK's `files` resource for shapes):
 * multipart upload, the SDKs' pre-signed upload flow, list, retrieve, content
 * (with HTTP Range), delete, and the processing history. Every upload starts
 * the file's workflow (`file-validation/<file-id>`).
 */
import path from 'node:path';
import type { Request, Response } from 'express';
import multer from 'multer';
import { getFile, listFileEvents, listFiles } from '../../db/files';
import { sendBlob } from '../blob-response';
import { cursorPage, decodeCursor, encodeCursor, WholeListPageQuery } from '../cursor-pages';
import type { ApiDeps } from '../deps';
import { parseOrThrow } from '../validation';
import { badRequest, notFound, payloadTooLarge } from '../errors';
import type { ApiRouter } from '../route';
import { BlobStorageEngine, type StoredUpload } from '../uploads/blob-storage-engine';
import { deleteFile, receiveSignedUpload, recordUploadedFile, startSignedUpload } from '../use-cases/files';
import { UploadUrlQuery, verifyUploadUrl } from '../uploads/presigned';
import {
  CreateFileUploadBody,
  FileDeletedSchema,
  FileEventsSchema,
  FileListSchema,
  FileObjectSchema,
  UploadFileFields,
} from '../schemas/files';
import { BinaryResponse, IdParams } from '../schemas/common';
import { toFileObject } from '../presenters/files';

export function addFileRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, config, blobs } = deps;
  const findFile = async (projectId: string, id: string) => {
    const row = await getFile(db, projectId, id);
    if (!row) throw notFound(`File '${id}' not found.`);
    return row;
  };

  const upload = multer({
    storage: new BlobStorageEngine(blobs, config.maxUploadBytes),
    limits: { fileSize: config.maxUploadBytes, files: 1, fields: 8, fieldSize: 4096, parts: 12 },
  }).single('file');

  router.add({
    method: 'post',
    path: '/files/upload',
    operationId: 'uploadFile',
    summary: 'Upload a file (multipart); validation starts after the upload',
    tags: ['files'],
    bodyTypes: ['multipart'],
    body: UploadFileFields,
    before: [upload],
    cleanup: async (req) => {
      const stored = req.file as unknown as StoredUpload | undefined;
      if (stored?.blobKey) await blobs.delete(stored.blobKey);
    },
    errors: [413, 503],
    response: { status: 200, description: 'The file, processing_status PENDING', schema: FileObjectSchema },
    handler: async ({ body, principal, req }) => {
      const stored = req.file as unknown as StoredUpload | undefined;
      if (!stored) throw badRequest("Missing required field 'file'.", 'file', 'invalid_value');
      // Over the quota, `cleanup` removes the stored blob; if the workflow cannot start, the row is gone too.
      const row = await recordUploadedFile(deps, principal, body, stored);
      return toFileObject(row);
    },
  });

  router.add({
    method: 'post',
    path: '/files',
    operationId: 'createFileUpload',
    summary: "Start the official SDKs' upload flow: 302 to a pre-signed URL that takes a PUT of the bytes",
    tags: ['files'],
    // The Python SDK sends these fields as a multipart form without a file (3.x), or in the query
    // string of an empty POST (earlier releases); the npm SDK as a URL-encoded form.
    bodyTypes: ['form', 'json', 'multipart'],
    body: CreateFileUploadBody,
    before: [
      multer({ limits: { files: 0, fields: 8, fieldSize: 4096, parts: 8 } }).none(),
      (req, _res, next) => {
        if (!req.body || Object.keys(req.body).length === 0) req.body = { ...(req.query as object) };
        next();
      },
    ],
    errors: [409, 413, 503],
    response: {
      status: 302,
      description: 'Location: the pre-signed upload URL; X-Together-File-Id: the new file id',
      schema: FileObjectSchema,
    },
    handler: async ({ body, principal, res }) => {
      const { row, url } = await startSignedUpload(deps, principal, body);
      res.status(302).set({ Location: url, 'X-Together-File-Id': row.id }).json(toFileObject(row));
      return undefined;
    },
  });

  router.addSigned(
    {
      method: 'put',
      path: '/files/:id/upload',
      operationId: 'putFileContent',
      summary: 'PUT the bytes to a pre-signed upload URL (from POST /v1/files); single use, expires',
      tags: ['files'],
      params: IdParams,
      query: UploadUrlQuery,
      errors: [403, 404, 413],
      response: { status: 200, description: 'The uploaded file; validation starts', schema: FileObjectSchema },
    },
    presignedUploadHandler(deps),
  );

  router.add({
    method: 'get',
    path: '/files',
    operationId: 'listFiles',
    summary: "The project's files, newest first, by cursor (unasked, a page of up to 1000)",
    tags: ['files'],
    query: WholeListPageQuery,
    response: { status: 200, description: 'Files', schema: FileListSchema },
    handler: async ({ principal, query }) => {
      const rows = await listFiles(db, principal.projectId, decodeCursor(query.after), query.limit + 1);
      return cursorPage(rows, query.limit, encodeCursor, toFileObject);
    },
  });

  // GET /files/{id}, and POST /files/{id}/preprocess, which the Python SDK calls after its
  // PUT: validation has already started by then, so both return the file as it is.
  for (const [method, path, operationId, summary] of [
    ['get', '/files/:id', 'retrieveFile', 'A file, with processing_status and validation_report'],
    ['post', '/files/:id/preprocess', 'preprocessFile', "The Python SDK's call after its PUT; returns the file"],
  ] as const) {
    router.add({
      method,
      path,
      operationId,
      summary,
      tags: ['files'],
      params: IdParams,
      errors: [404],
      response: { status: 200, description: 'The file', schema: FileObjectSchema },
      handler: async ({ params, principal }) => toFileObject(await findFile(principal.projectId, params.id)),
    });
  }

  router.add({
    method: 'get',
    path: '/files/:id/events',
    operationId: 'listFileEvents',
    summary: 'Every processing_status move of a file, oldest first',
    tags: ['files'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'Status history', schema: FileEventsSchema },
    handler: async ({ params, principal }) => {
      await findFile(principal.projectId, params.id);
      const events = await listFileEvents(db, params.id);
      return {
        object: 'list' as const,
        data: events.map((e) => ({ ...e, created_at: new Date(e.created_at).toISOString() })),
      };
    },
  });

  router.add({
    method: 'get',
    path: '/files/:id/content',
    operationId: 'retrieveFileContent',
    summary: 'The bytes of a file, streamed; supports a single HTTP Range',
    tags: ['files'],
    params: IdParams,
    errors: [404],
    response: {
      status: 200,
      description: 'The file content (206 for a range)',
      schema: BinaryResponse,
      mediaType: 'application/octet-stream',
    },
    handler: async ({ params, principal, req, res }) => {
      const row = await findFile(principal.projectId, params.id);
      if (row.bytes === null) throw notFound(`File '${params.id}' has no content yet: its upload has not completed.`);
      await sendBlob(req, res, blobs, {
        key: row.blob_key,
        size: Number(row.bytes),
        filename: path.basename(row.filename),
        contentType: 'application/octet-stream',
        ...(row.sha256 ? { etag: row.sha256 } : {}),
      });
      return undefined;
    },
  });

  router.add({
    method: 'delete',
    path: '/files/:id',
    operationId: 'deleteFile',
    summary: 'Delete a file and its content',
    tags: ['files'],
    params: IdParams,
    errors: [404, 409],
    response: { status: 200, description: 'Deleted', schema: FileDeletedSchema },
    handler: async ({ params, principal }) => {
      const row = await findFile(principal.projectId, params.id);
      await deleteFile(deps, row);
      return { id: row.id, object: 'file' as const, deleted: true as const };
    },
  });
}

/** PUT of the bytes to a pre-signed URL (no API key: the URL's signature is the credential). */
function presignedUploadHandler(deps: ApiDeps) {
  const { config } = deps;
  return async (req: Request, res: Response) => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    // Parsed like any route's path: a bad id is a 400 naming `id` (the signed router has no RouteSpec parse).
    const fileId = parseOrThrow(IdParams, req.params, 'path', false).id;
    const grant = verifyUploadUrl(config.keyring, fileId, req.query);
    const declared = Number(req.headers['content-length']);
    if (!req.headers['content-length'] || !Number.isSafeInteger(declared) || declared < 0) {
      throw badRequest('Send the upload with a Content-Length header.', 'Content-Length', 'length_required');
    }
    if (declared > grant.maxBytes) {
      throw payloadTooLarge(
        `This upload URL accepts at most ${grant.maxBytes} bytes; the request declares ${declared}.`,
      );
    }
    const updated = await receiveSignedUpload(
      deps,
      { fileId, tokenId: grant.tokenId, exactBytes: grant.exactBytes, declared },
      req,
    );
    res.status(200).json(toFileObject(updated));
  };
}
