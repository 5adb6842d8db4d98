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
import type { Request, Response } from 'express';
import type { ApiDeps } from '../deps';
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
import { declaredLength } from '../uploads/signed-put';
import {
  abortStorageParts,
  completeStorageParts,
  grantStorageUpload,
  storeStorageObject,
  storeStoragePart,
} from '../use-cases/storage-uploads';

const objectPath = (id: string) => `/v1/storage/objects/${id}`;
const partPath = (id: string, part: number) => `${objectPath(id)}/parts/${part}`;

export function addStorageRoutes(router: ApiRouter, deps: ApiDeps) {
  const { config } = deps;
  const maxPutBytes = () => Math.min(config.maxUploadBytes, config.maxSinglePutBytes);
  const keyring = () => {
    if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    return config.keyring;
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
      const id = await grantStorageUpload(deps, principal.projectId, body.filename);
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
      const id = await grantStorageUpload(deps, principal.projectId, body.filename);
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
      await completeStorageParts(deps, principal, body);
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
      await abortStorageParts(deps, principal, body);
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
      const md5 = await storeStorageObject(deps, id, declared, req);
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
      const md5 = await storeStoragePart(deps, id, part, declared, req);
      res.set('ETag', `"${md5}"`).status(200).end();
    },
  );
}
