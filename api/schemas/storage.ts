/** Storage uploads (`/v1/storage/*`), as the Python CLI's `beta jig volumes` sends them. */
import { z } from 'zod';

export const StorageUploadRequestBody = z.object({
  filename: z.string().min(1).max(1024).meta({ description: 'The path of the object, e.g. <volume>/<version>/<file>' }),
});

export const StorageUploadRequestSchema = z.object({
  filename: z.string(),
  upload_url: z.object({
    url: z.string().meta({ description: 'A pre-signed URL that takes one PUT of the bytes (with Content-Length)' }),
    method: z.literal('PUT'),
    headers: z.record(z.string(), z.string()),
  }),
});

/** Most parts one object may be uploaded in. */
export const MAX_STORAGE_PARTS = 10_000;

export const StorageMultipartInitBody = z.object({
  filename: z.string().min(1).max(1024),
  parts_count: z.number().int().positive().max(MAX_STORAGE_PARTS),
});

const UploadId = z.string().regex(/^sobj_[0-9a-f-]{36}$/);

export const StorageMultipartInitSchema = z.object({
  upload_id: UploadId,
  part_upload_urls: z.array(
    z.object({
      part_number: z.number().int(),
      url: z.string(),
      method: z.literal('PUT'),
      headers: z.record(z.string(), z.string()),
    }),
  ),
});

export const StorageMultipartCompleteBody = z.object({
  filename: z.string().min(1).max(1024),
  upload_id: UploadId,
  parts: z
    .array(z.object({ part_number: z.number().int().positive(), etag: z.string().max(128) }))
    .min(1)
    .max(MAX_STORAGE_PARTS),
});

export const StorageMultipartAbortBody = z.object({
  filename: z.string().min(1).max(1024),
  upload_id: UploadId,
});

export const StorageObjectParams = z.object({ id: UploadId });
export const StoragePartParams = z.object({
  id: UploadId,
  part: z.coerce.number().int().positive().max(MAX_STORAGE_PARTS),
});
