/**
 * Storage uploads (`/v1/storage/*`): how the Python CLI's `beta jig volumes create` and `update`
 * put a directory's files where a volume finds them. `upload-request` grants one signed PUT to a
 * path; the PUT stores the bytes as the path's object (db/storage-objects.ts). Files of 100 MiB and
 * more the CLI sends in parts: `multipart/init` grants a signed PUT per part (each answers its MD5
 * as ETag), `complete` joins the parts named with their ETags into the object, `abort` drops them.
 * A volume whose `source_prefix` names the directory shows the objects under it, named relative to
 * it (db/deployment-volumes.ts). Uploads whose bytes never arrived are dropped, with their parts,
 * by the project's next upload once their URLs have expired.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Request, Response } from 'express';
import {
  dropPendingStorageObject,
  dropStaleStorageUploads,
  getStorageObject,
  insertStorageUpload,
  listStorageParts,
  recordStoragePart,
  storageObjectUploaded,
} from '../../db/storage-objects';
import { withTransaction } from '../../db/pool';
import { newId } from '../../platform/ids';
import { isSafeVolumePath } from '../../providers/containers/volume-store';
import { deleteScheduledBlobs, discardBlobs } from '../../providers/storage/blob-deletions';
import type { ApiDeps } from '../deps';
import { ApiError, badRequest, notFound, payloadTooLarge } from '../errors';
import type { ApiRouter } from '../route';
import { BinaryResponse, EmptyResponse } from '../schemas/common';
import {
  StorageMultipartAbortBody,
  StorageMultipartCompleteBody,
  StorageMultipartInitBody,
  StorageMultipartInitSchema,
  StorageObjectParams,
  StoragePartParams,
  StorageUploadRequestBody,
  StorageUploadRequestSchema,
} from '../schemas/storage';
import { parseOrThrow } from '../validation';
import { PartUploadUrlQuery, partUploadUrl, verifyPartUploadUrl } from '../uploads/presigned';
import { declaredLength, storeSignedPut } from '../uploads/signed-put';
import { requireStorageRoom } from '../uploads/storage-quota';

const objectPath = (id: string) => `/v1/storage/objects/${id}`;
const partPath = (id: string, part: number) => `${objectPath(id)}/parts/${part}`;
const usedUpload = (id: string) =>
  new ApiError(
    409,
    `Storage upload '${id}' has its bytes already; ask for a new URL.`,
    'conflict_error',
    null,
    'upload_url_used',
  );

export function addStorageRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, config, blobs } = deps;
  const maxPutBytes = () => Math.min(config.maxUploadBytes, config.maxSinglePutBytes);
  const keyring = () => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    return config.keyring;
  };
  const requirePath = (filename: string) => {
    if (!isSafeVolumePath(filename))
      throw badRequest(
        `'${filename}' is not a storage path: plain segments separated by '/', none empty, starting with '.' or climbing with '..'.`,
        'filename',
      );
  };
  /** Blobs whose rows the storage-objects functions removed and recorded for deletion. */
  const deleteBlobs = (keys: string[]) => deleteScheduledBlobs(db, blobs, keys);
  /** A new upload to `path`; first the project's uploads whose URLs expired unused go, with their parts. */
  const grant = async (projectId: string, path: string) => {
    await deleteBlobs(await dropStaleStorageUploads(db, projectId, config.uploadUrlTtlSeconds + 60));
    const id = newId('sobj', '_');
    await insertStorageUpload(db, { id, projectId, path });
    return id;
  };
  const requirePendingUpload = async (projectId: string, id: string, filename: string) => {
    const object = await getStorageObject(db, id);
    if (!object || object.project_id !== projectId || object.path !== filename)
      throw notFound(`No upload '${id}' of '${filename}' in this project.`);
    if (object.uploaded_at) throw usedUpload(id);
    return object;
  };
  const signedPut = (resourcePath: string) => ({
    url: partUploadUrl(
      config.publicUrl,
      keyring(),
      resourcePath,
      maxPutBytes(),
      Math.floor(Date.now() / 1000) + config.uploadUrlTtlSeconds,
    ),
    method: 'PUT' as const,
    headers: {},
  });

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
      keyring();
      requirePath(body.filename);
      const id = await grant(principal.projectId, body.filename);
      return { filename: body.filename, upload_url: signedPut(objectPath(id)) };
    },
  });

  router.add({
    method: 'post',
    path: '/storage/multipart/init',
    operationId: 'initStorageMultipartUpload',
    summary: 'Start an upload in parts: a signed PUT URL for each part',
    tags: ['deployments'],
    strict: true,
    body: StorageMultipartInitBody,
    errors: [503],
    response: { status: 200, description: 'The upload and its part URLs', schema: StorageMultipartInitSchema },
    handler: async ({ body, principal }) => {
      keyring();
      requirePath(body.filename);
      const id = await grant(principal.projectId, body.filename);
      return {
        upload_id: id,
        part_upload_urls: Array.from({ length: body.parts_count }, (_, i) => ({
          part_number: i + 1,
          ...signedPut(partPath(id, i + 1)),
        })),
      };
    },
  });

  router.add({
    method: 'post',
    path: '/storage/multipart/complete',
    operationId: 'completeStorageMultipartUpload',
    summary: 'Join the uploaded parts (named with their ETags) into the object',
    tags: ['deployments'],
    strict: true,
    body: StorageMultipartCompleteBody,
    errors: [404, 409, 413],
    response: { status: 200, description: 'Stored', schema: EmptyResponse },
    handler: async ({ body, principal }) => {
      const object = await requirePendingUpload(principal.projectId, body.upload_id, body.filename);
      const stored = new Map((await listStorageParts(db, object.id)).map((p) => [p.part_number, p]));
      const named = [...body.parts].sort((a, b) => a.part_number - b.part_number);
      const parts = named.map((n) => {
        const at = `parts[${body.parts.indexOf(n)}]`;
        const part = stored.get(n.part_number);
        if (!part) throw badRequest(`Part ${n.part_number} was not uploaded.`, `${at}.part_number`, 'part_missing');
        if (part.md5 !== n.etag.replace(/"/g, ''))
          throw badRequest(
            `Part ${n.part_number}'s ETag is not the one its upload answered.`,
            `${at}.etag`,
            'etag_mismatch',
          );
        return part;
      });
      const total = parts.reduce((n, p) => n + Number(p.bytes), 0);
      if (total > config.maxUploadBytes)
        throw payloadTooLarge(`A storage object may be at most ${config.maxUploadBytes} bytes.`, 'parts');
      const key = `storage/${object.project_id}/${object.id}-${randomUUID()}`;
      const joined = Readable.from(
        (async function* () {
          for (const p of parts) yield* blobs.read(p.blob_key, undefined, { chunkBytes: 1 << 20 });
        })(),
      );
      const blob = await blobs.put(key, joined, { maxBytes: total });
      const unreachable = await storageObjectUploaded(db, object.id, { bytes: blob.bytes, blobKey: key });
      if (!unreachable) {
        await blobs.delete(key);
        throw usedUpload(object.id);
      }
      await deleteBlobs(unreachable);
      return {};
    },
  });

  router.add({
    method: 'post',
    path: '/storage/multipart/abort',
    operationId: 'abortStorageMultipartUpload',
    summary: 'Drop an upload in parts and the parts uploaded so far',
    tags: ['deployments'],
    strict: true,
    body: StorageMultipartAbortBody,
    errors: [404, 409],
    response: { status: 200, description: 'Dropped', schema: EmptyResponse },
    handler: async ({ body, principal }) => {
      const object = await requirePendingUpload(principal.projectId, body.upload_id, body.filename);
      await deleteBlobs(await dropPendingStorageObject(db, object.id));
      return {};
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
      errors: [403, 404, 409, 413],
      response: { status: 200, description: 'Stored (ETag header: its MD5)', schema: BinaryResponse },
    },
    async (req: Request, res: Response) => {
      const { id } = parseOrThrow(StorageObjectParams, req.params, 'path', false);
      const declared = declaredLength(
        req,
        Math.min(verifyPartUploadUrl(keyring(), objectPath(id), req.query), maxPutBytes()),
      );
      const object = await getStorageObject(db, id);
      if (!object) throw notFound(`Storage upload '${id}' does not exist.`);
      if (object.uploaded_at) throw usedUpload(id);
      await requireStorageRoom(db, config.projectStorageQuotaBytes, object.project_id, declared, 'Content-Length');
      // Each attempt writes its own blob, so a retry never races a slow earlier attempt.
      const key = `storage/${object.project_id}/${id}-${randomUUID()}`;
      const md5 = await storeSignedPut(blobs, req, key, declared);
      const unreachable = await storageObjectUploaded(db, id, { bytes: declared, blobKey: key });
      if (!unreachable) {
        await blobs.delete(key);
        throw usedUpload(id);
      }
      await deleteBlobs(unreachable);
      res.set('ETag', `"${md5}"`).status(200).end();
    },
  );

  router.addSigned(
    {
      method: 'put',
      path: '/storage/objects/:id/parts/:part',
      operationId: 'putStorageObjectPart',
      summary: 'PUT one part of a storage object to its signed URL (from multipart/init); its ETag is its MD5',
      tags: ['deployments'],
      params: StoragePartParams,
      query: PartUploadUrlQuery,
      errors: [403, 404, 409, 413],
      response: { status: 200, description: 'Stored (ETag header: its MD5)', schema: BinaryResponse },
    },
    async (req: Request, res: Response) => {
      const { id, part } = parseOrThrow(StoragePartParams, req.params, 'path', false);
      const declared = declaredLength(
        req,
        Math.min(verifyPartUploadUrl(keyring(), partPath(id, part), req.query), maxPutBytes()),
      );
      const object = await getStorageObject(db, id);
      if (!object) throw notFound(`Storage upload '${id}' does not exist.`);
      if (object.uploaded_at) throw usedUpload(id);
      await requireStorageRoom(db, config.projectStorageQuotaBytes, object.project_id, declared, 'Content-Length');
      const key = `storage/${object.project_id}/${id}/part-${String(part).padStart(5, '0')}-${randomUUID()}`;
      const md5 = await storeSignedPut(blobs, req, key, declared);
      const recorded = await withTransaction(db, (tx) =>
        recordStoragePart(tx, { objectId: id, partNumber: part, blobKey: key, bytes: declared, md5 }),
      );
      if (!recorded) {
        // Completed, aborted or dropped as stale while this part arrived: its blob goes too.
        await discardBlobs(db, blobs, [key]);
        if (!(await getStorageObject(db, id))) throw notFound(`Storage upload '${id}' does not exist.`);
        throw usedUpload(id);
      }
      if (recorded.replaced) await deleteBlobs([recorded.replaced]);
      res.set('ETag', `"${md5}"`).status(200).end();
    },
  );
}
