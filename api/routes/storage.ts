/**
 * Storage uploads (`/v1/storage/*`): how the Python CLI's `beta jig volumes create` and `update`
 * put a directory's files where a volume finds them. `upload-request` grants one signed PUT to a
 * path; the PUT stores the bytes as the path's object (db/storage-objects.ts). A volume whose
 * `source_prefix` names the directory shows the objects under it, named relative to it
 * (db/deployment-volumes.ts). Objects are taken whole: multipart (the CLI's way for files of 100 MiB
 * and more) is refused with what to do instead.
 */
import { randomUUID } from 'node:crypto';
import type { Request, Response } from 'express';
import { storageObjectUploaded, getStorageObject, insertStorageUpload } from '../../db/storage-objects';
import { newId } from '../../platform/ids';
import { isSafeVolumePath } from '../../providers/containers/volume-store';
import { BlobTooLargeError } from '../../providers/storage/blob-store';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, notFound, payloadTooLarge } from '../errors';
import type { ApiRouter } from '../route';
import { BinaryResponse, EmptyResponse } from '../schemas/common';
import {
  StorageMultipartInitBody,
  StorageObjectParams,
  StorageUploadRequestBody,
  StorageUploadRequestSchema,
} from '../schemas/storage';
import { parseOrThrow } from '../validation';
import { PartUploadUrlQuery, partUploadUrl, verifyPartUploadUrl } from '../uploads/presigned';
import { requireStorageRoom } from '../uploads/storage-quota';

const objectPath = (id: string) => `/v1/storage/objects/${id}`;

export function addStorageRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, config } = deps;
  const maxObjectBytes = () => Math.min(config.maxUploadBytes, config.maxSinglePutBytes);
  const requirePath = (filename: string) => {
    if (!isSafeVolumePath(filename))
      throw badRequest(
        `'${filename}' is not a storage path: plain segments separated by '/', none empty, starting with '.' or climbing with '..'.`,
        'filename',
      );
  };

  router.add({
    method: 'post',
    path: '/storage/upload-request',
    operationId: 'requestStorageUpload',
    summary: 'A signed URL that takes one PUT of an object at a path (the CLI’s volume uploads)',
    tags: ['deployments'],
    strict: true,
    body: StorageUploadRequestBody,
    errors: [503],
    response: { status: 200, description: 'Where to PUT the bytes', schema: StorageUploadRequestSchema },
    handler: async ({ body, principal }) => {
      if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
      requirePath(body.filename);
      const id = newId('sobj', '_');
      await insertStorageUpload(db, { id, projectId: principal.projectId, path: body.filename });
      const expires = Math.floor(Date.now() / 1000) + config.uploadUrlTtlSeconds;
      return {
        filename: body.filename,
        upload_url: {
          url: partUploadUrl(config.publicUrl, config.keyring, objectPath(id), maxObjectBytes(), expires),
          method: 'PUT' as const,
          headers: {},
        },
      };
    },
  });

  router.add({
    method: 'post',
    path: '/storage/multipart/init',
    operationId: 'initStorageMultipartUpload',
    summary: 'Refused: objects are taken whole (the answer says how to send a large one)',
    tags: ['deployments'],
    body: StorageMultipartInitBody,
    errors: [400],
    response: { status: 200, description: 'Never: always a 400', schema: EmptyResponse },
    handler: async ({ body }) => {
      requirePath(body.filename);
      throw badRequest(
        `This installation takes storage objects whole, in one PUT of up to ${maxObjectBytes()} bytes; it has no multipart storage uploads. ` +
          `Set TOGETHER_MULTIPART_THRESHOLD_MB above the file's size in MiB and run the command again.`,
        'parts_count',
        'use_single_upload',
      );
    },
  });

  router.addSigned(
    {
      method: 'put',
      path: '/storage/objects/:id',
      operationId: 'putStorageObject',
      summary: 'PUT the bytes of a storage object to its signed URL (from upload-request); once',
      tags: ['deployments'],
      params: StorageObjectParams,
      query: PartUploadUrlQuery,
      errors: [403, 404, 409, 411, 413],
      response: { status: 200, description: 'Stored', schema: BinaryResponse },
    },
    putHandler(deps, maxObjectBytes),
  );
}

function putHandler(deps: ApiDeps, maxObjectBytes: () => number) {
  const { db, config, blobs } = deps;
  return async (req: Request, res: Response) => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    const { id } = parseOrThrow(StorageObjectParams, req.params, 'path', false);
    const maxBytes = Math.min(verifyPartUploadUrl(config.keyring, objectPath(id), req.query), maxObjectBytes());
    const declared = Number(req.headers['content-length']);
    if (!req.headers['content-length'] || !Number.isSafeInteger(declared))
      throw new ApiError(
        411,
        'Send the object with a Content-Length header.',
        'invalid_request_error',
        'Content-Length',
        'length_required',
      );
    if (declared > maxBytes)
      throw payloadTooLarge(`A storage object may be at most ${maxBytes} bytes.`, 'Content-Length');
    const object = await getStorageObject(db, id);
    if (!object) throw notFound(`Storage upload '${id}' does not exist.`);
    const used = () =>
      new ApiError(
        409,
        `Storage upload '${id}' has its bytes already; ask for a new URL.`,
        'conflict_error',
        null,
        'upload_url_used',
      );
    if (object.uploaded_at) throw used();
    await requireStorageRoom(db, config.projectStorageQuotaBytes, object.project_id, declared, 'Content-Length');
    // Each attempt writes its own blob, so a retry never races a slow earlier attempt.
    const key = `storage/${object.project_id}/${id}-${randomUUID()}`;
    let stored;
    try {
      stored = await blobs.put(key, req, { maxBytes: declared });
    } catch (err) {
      if (err instanceof BlobTooLargeError)
        throw badRequest('The body holds more bytes than its Content-Length.', null);
      throw err;
    }
    if (stored.bytes !== declared) {
      await blobs.delete(key);
      throw badRequest(`The body ended after ${stored.bytes} of ${declared} bytes.`, null, 'incomplete_upload');
    }
    const unreachable = await storageObjectUploaded(db, id, { bytes: stored.bytes, blobKey: key });
    if (!unreachable) {
      await blobs.delete(key);
      throw used();
    }
    for (const old of unreachable) await blobs.delete(old).catch(() => undefined); // a leftover blob is only space
    res.status(200).end();
  };
}
