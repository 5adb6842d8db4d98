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

export const StorageMultipartInitBody = z.object({
  filename: z.string().min(1).max(1024),
  parts_count: z.number().int().positive(),
});

export const StorageObjectParams = z.object({ id: z.string().regex(/^sobj_[0-9a-f-]{36}$/) });
