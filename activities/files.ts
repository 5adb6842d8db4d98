/**
 * Activities of the file workflow. validateFile streams the blob through the
 * right driver, heartbeats its position, and on a retry (worker lost, storage
 * hiccup) continues from the last heartbeat instead of the first byte.
 */
import { Readable } from 'node:stream';
import { ApplicationFailure, Context } from '@temporalio/activity';
import type { ProcessingStatus, ValidationReport } from '../shared/files';
import type { ValidationProgress } from '../datasets/progress';
import { buildReport } from '../datasets/report';
import { UnknownFileTypeError, validateDataset } from '../datasets/validate';
import { deleteUnfinishedFile, getFileById, recordFileEvent, recordFileStatus } from '../db/files';
import { withTransaction, type Db } from '../db/pool';
import { deleteScheduledBlobs } from '../providers/storage/blob-deletions';
import type { BlobStore } from '../providers/storage/blob-store';

// Larger reads than the 64 KiB default: fewer chunks, fewer partial lines to carry.
const READ_CHUNK_BYTES = 1024 * 1024;

export function createFileActivities({ db, blobs }: { db: Db; blobs: BlobStore }) {
  return {
    async recordFileStatus(p: {
      fileId: string;
      status: ProcessingStatus;
      message?: string;
      report?: ValidationReport | null;
      note?: string | null;
    }): Promise<void> {
      await recordFileStatus(db, p);
    },

    /**
     * Removes a file whose upload never completed: its row, any partial blob, and multipart parts.
     * The blobs' keys are recorded with the row's delete, so a retry after the row is gone, or a
     * storage failure, leaves them to the control worker's blob deletion rounds, not on disk.
     */
    async discardUnfinishedUpload({ fileId }: { fileId: string }): Promise<void> {
      const keys = await withTransaction(db, (tx) => deleteUnfinishedFile(tx, fileId));
      const { failed } = await deleteScheduledBlobs(db, blobs, keys);
      if (failed.length) {
        Context.current().log.warn('blobs of a discarded upload not deleted yet; the blob deletion rounds retry', {
          failed,
        });
      }
    },

    async validateFile({ fileId }: { fileId: string }): Promise<ValidationReport> {
      const ctx = Context.current();
      const file = await getFileById(db, fileId);
      if (!file) throw ApplicationFailure.nonRetryable(`file ${fileId} no longer exists`, 'FileGone');
      const size = Number(file.bytes);
      const resume = ctx.info.heartbeatDetails as ValidationProgress | undefined;

      await recordFileStatus(db, { fileId, status: 'RUNNING', message: 'Validating.' });
      if (resume && resume.line > 0) {
        await recordFileEvent(
          db,
          fileId,
          'RUNNING',
          `Attempt ${ctx.info.attempt} resumed after line ${resume.line} (byte ${resume.offset}).`,
        );
      }

      // Heartbeat on every unit of progress, and on a timer in between so a
      // long stretch of work (a large Parquet row group) is not mistaken for a
      // lost worker. The SDK throttles what actually goes to the server.
      let latest: ValidationProgress | undefined = resume;
      const onProgress = (p: ValidationProgress) => {
        latest = structuredClone(p);
        ctx.heartbeat(latest);
      };
      const ticker = setInterval(() => ctx.heartbeat(latest), 1000);
      try {
        const outcome = await validateDataset(file.file_type, file.purpose, {
          read: (start) =>
            start >= size
              ? Readable.from([])
              : blobs.read(file.blob_key, { start, end: size - 1 }, { chunkBytes: READ_CHUNK_BYTES }),
          path: () => blobs.localPath(file.blob_key),
          size,
          resume,
          onProgress,
          signal: ctx.cancellationSignal,
        }).catch((err) => {
          if (err instanceof UnknownFileTypeError)
            throw ApplicationFailure.nonRetryable(err.message, 'UnknownFileType');
          throw err;
        });
        return buildReport(fileId, file.file_type, outcome);
      } finally {
        clearInterval(ticker);
      }
    },
  };
}

export type FileActivities = ReturnType<typeof createFileActivities>;
