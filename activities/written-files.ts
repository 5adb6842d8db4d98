/**
 * Files the platform writes into a project for a piece of work (a batch's output and error files,
 * an evaluation's result file): stored as uploads are, with an id derived from the work, so a
 * retried activity finds the file it already made instead of making a second.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { getFileById, insertFile, recordFileStatus } from '../db/files';
import type { FilePurpose } from '../shared/files';
import { withTransaction, type Db } from '../db/pool';
import type { BlobStore } from '../providers/storage/blob-store';

/** The file id `ownerId`'s `kind` file always has (a file id's usual form). */
export function resultFileId(ownerId: string, kind: string): string {
  const h = createHash('sha256').update(`${ownerId}/${kind}`).digest('hex');
  return `file-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Stores `lines` as the project's JSONL file `fileId` (COMPLETED, not validated), unless it exists. */
export async function storeWrittenFile(
  db: Db,
  blobs: BlobStore,
  f: { projectId: string; fileId: string; filename: string; purpose: FilePurpose; writer: string },
  lines: AsyncIterable<string>,
): Promise<void> {
  if (await getFileById(db, f.fileId)) return;
  const key = `files/${f.projectId}/${f.fileId}`; // where uploads keep a file (api/uploads fileBlobKey)
  const stored = await blobs.put(key, Readable.from(lines), { maxBytes: Number.MAX_SAFE_INTEGER });
  await withTransaction(db, async (tx) => {
    await insertFile(tx, {
      id: f.fileId,
      projectId: f.projectId,
      filename: f.filename,
      purpose: f.purpose,
      fileType: 'jsonl',
      blobKey: key,
      stored,
    });
    await recordFileStatus(tx, {
      fileId: f.fileId,
      status: 'COMPLETED',
      message: `Written by ${f.writer}.`,
      note: `Written by ${f.writer}; not validated.`,
    });
  });
}
