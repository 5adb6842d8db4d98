/**
 * fileValidation (`file-validation/<file-id>`): the life of an uploaded file
 * from "bytes expected" to a validation verdict.
 *
 * 1. For the pre-signed upload flow, wait for the bytes: the API signals when
 *    an upload starts and when it ends. An upload that never starts before its
 *    URL expires, or that fails, is discarded (row and partial blob) on a
 *    durable timer, so nothing dangles.
 * 2. Purposes that need no validation are marked COMPLETED with a note.
 * 3. Otherwise QUEUED -> RUNNING (the activity) -> COMPLETED | INVALID_FORMAT,
 *    or FAILED when validation cannot finish after its retries.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  condition,
  defineSignal,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { FileActivities } from '../activities/files';
import {
  purposeNeedsValidation,
  type FilePurpose,
  type FileValidationInput,
  type ValidationReport,
} from '../shared/files';
import { statusSearchAttributes } from '../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export const uploadStartedSignal = defineSignal('uploadStarted');
export const uploadFinishedSignal = defineSignal<[{ ok: boolean; error?: string }]>('uploadFinished');

export interface FileWorkflowInput extends FileValidationInput {
  purpose: FilePurpose;
  /** Pre-signed flow: the bytes are not there yet; the URL expires at this ISO time. */
  awaitUploadUntil?: string;
  /** How long a started upload may take before it is given up. */
  uploadTimeoutSeconds?: number;
}

const records = proxyActivities<FileActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 30 },
});

export async function fileValidation(input: FileWorkflowInput): Promise<ValidationReport | null> {
  const { fileId } = input;

  if (input.awaitUploadUntil) {
    let started = false;
    let finished: { ok: boolean; error?: string } | undefined;
    setHandler(uploadStartedSignal, () => void (started = true));
    setHandler(uploadFinishedSignal, (result) => void (finished = result));
    setCurrentDetails(`Waiting for the upload (URL valid until ${input.awaitUploadUntil}).`);
    const untilExpiry = Math.max(0, Date.parse(input.awaitUploadUntil) - Date.now());
    await condition(() => started || finished !== undefined, untilExpiry);
    if (started && !finished) {
      setCurrentDetails('Upload in progress.');
      await condition(() => finished !== undefined, `${input.uploadTimeoutSeconds ?? 86_400} seconds`);
    }
    if (!finished?.ok) {
      const why = finished ? `the upload failed: ${finished.error ?? 'unknown error'}` : 'no upload arrived in time';
      setCurrentDetails(`Discarded: ${why}.`);
      await records.discardUnfinishedUpload.executeWithOptions({ summary: 'discard unfinished upload' }, [{ fileId }]);
      upsertSearchAttributes(statusSearchAttributes('DISCARDED'));
      return null;
    }
  }

  if (!purposeNeedsValidation(input.purpose)) {
    await records.recordFileStatus({
      fileId,
      status: 'COMPLETED',
      message: `Validation skipped: files for purpose '${input.purpose}' are not validated.`,
      note: `Validation skipped: files for purpose '${input.purpose}' are not validated.`,
    });
    upsertSearchAttributes(statusSearchAttributes('COMPLETED'));
    return null;
  }

  await records.recordFileStatus({ fileId, status: 'QUEUED', message: 'Waiting for a validation worker.' });
  upsertSearchAttributes(statusSearchAttributes('QUEUED'));
  setCurrentDetails('Validating.');
  const validator = proxyActivities<FileActivities>({
    taskQueue: CONTROL_TASK_QUEUE,
    startToCloseTimeout: '12 hours',
    heartbeatTimeout: `${input.heartbeatTimeoutSeconds} seconds`,
    retry: {
      initialInterval: '2 seconds',
      maximumInterval: '1 minute',
      maximumAttempts: 8,
      nonRetryableErrorTypes: ['FileGone', 'UnknownFileType'],
    },
  });
  try {
    const report = await validator.validateFile.executeWithOptions({ summary: `validate ${fileId}` }, [{ fileId }]);
    const status = report.valid ? 'COMPLETED' : 'INVALID_FORMAT';
    await records.recordFileStatus({
      fileId,
      status,
      report,
      message: report.valid ? `Valid: ${report.nlines} records.` : report.error,
    });
    upsertSearchAttributes(statusSearchAttributes(status));
    setCurrentDetails(report.valid ? `Valid: ${report.nlines} records.` : `Invalid. ${report.error}`);
    return report;
  } catch (err) {
    if (isCancellation(err)) throw err; // the file was deleted: nothing left to record
    const cause = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause : err;
    const reason = (cause as Error).message;
    await records.recordFileStatus({
      fileId,
      status: 'FAILED',
      message: `Validation could not finish: ${reason}`,
      note: `Validation could not finish: ${reason}`,
    });
    upsertSearchAttributes(statusSearchAttributes('FAILED'));
    setCurrentDetails(`Failed: ${reason}`);
    return null;
  }
}
