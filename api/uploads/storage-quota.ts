/**
 * The per-project storage quota (GANTRY_PROJECT_STORAGE_QUOTA_BYTES) over
 * everything a project stores (db/files.ts projectStoredBytes): checked
 * wherever bytes are about to arrive through the API, with the size the client
 * declared (a pre-signed PUT's Content-Length, a multipart upload's file_size)
 * or, for a direct upload, the size it turned out to have. Concurrent uploads
 * of one project can each pass the check; the overshoot is bounded by them.
 * (Model imports by URL check the same quota in their activity.)
 */
import { projectStoredBytes } from '../../db/files';
import type { Queryable } from '../../db/pool';
import { ApiError } from '../errors';

export async function requireStorageRoom(
  db: Queryable,
  quotaBytes: number,
  projectId: string,
  incomingBytes: number,
  param: string | null,
): Promise<void> {
  if (quotaBytes <= 0) return;
  const stored = await projectStoredBytes(db, projectId);
  if (stored + incomingBytes > quotaBytes) {
    throw new ApiError(
      413,
      `The project would hold ${stored + incomingBytes} bytes; its storage quota is ${quotaBytes} bytes (${stored} in use by its files, volume uploads and registry models). Delete what you no longer need.`,
      'request_too_large',
      param,
      'storage_quota_exceeded',
    );
  }
}
