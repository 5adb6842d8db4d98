/** Model revisions with real files in the blob store, as an upload would leave them (validated). */
import { Readable } from 'node:stream';
import { insertRevision } from '../../db/models';
import type { TestPlatform } from './platform';

/** Stores `files` under the revision's prefix and records the revision as validated. */
export async function storeValidatedRevision(
  p: Pick<TestPlatform, 'db' | 'blobs'>,
  modelId: string,
  revisionId: string,
  files: Record<string, Buffer>,
): Promise<void> {
  const blobPrefix = `registry/${modelId}/${revisionId}`;
  for (const [name, content] of Object.entries(files)) {
    await p.blobs.put(`${blobPrefix}/${name}`, Readable.from([content]), { maxBytes: 1 << 20 });
  }
  await insertRevision(p.db, {
    id: revisionId,
    modelId,
    blobPrefix,
    files: Object.entries(files).map(([path, content]) => ({ path, bytes: content.length, sha256: 'x' })),
    validationStatus: 'REVISION_VALIDATION_STATUS_SUCCESS',
  });
}
