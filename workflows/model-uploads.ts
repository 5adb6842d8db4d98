/**
 * modelUpload (`model-upload/<id>`): imports a model's files from a URL into
 * the registry as a new revision. The import activity runs on the control
 * queue, heartbeating its progress; a lost worker or a network failure is
 * retried up to the upload's `maxRestarts` (the SDK's restart count), while a
 * refused URL or an unusable archive fails at once. Either way the upload ends
 * SUCCEEDED or FAILED with a sentence saying why.
 */
import {
  ApplicationFailure,
  patched,
  proxyActivities,
  setCurrentDetails,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import type { ModelUploadActivities } from '../activities/model-uploads';
import { statusSearchAttributes } from '../shared/search-attributes';
import { PATCHES } from './patches';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export interface ModelUploadInput {
  uploadId: string;
  modelId: string;
  maxRestarts: number;
}

const bookkeeping = proxyActivities<ModelUploadActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 50 },
});

/** GantryStatus/GantryPhase say how the upload ended. (Before this patch they kept PENDING.) */
const searchableEnd = (status: 'REMOTE_UPLOAD_STATUS_SUCCEEDED' | 'REMOTE_UPLOAD_STATUS_FAILED') => {
  if (patched(PATCHES.modelUploadFinalStatus.id)) upsertSearchAttributes(statusSearchAttributes(status));
};

/** The innermost message: what went wrong, without Temporal's wrapping. */
function reason(err: unknown): string {
  let e = err as { cause?: unknown; message?: string };
  while (e?.cause) e = e.cause as typeof e;
  return e?.message ?? String(err);
}

export async function modelUpload(input: ModelUploadInput): Promise<'succeeded' | 'failed'> {
  const importer = proxyActivities<ModelUploadActivities>({
    taskQueue: CONTROL_TASK_QUEUE,
    startToCloseTimeout: '12 hours',
    heartbeatTimeout: '1 minute',
    retry: {
      initialInterval: '2 seconds',
      maximumInterval: '1 minute',
      maximumAttempts: input.maxRestarts + 1,
      nonRetryableErrorTypes: ['UploadRefused', 'UploadInvalid', 'UploadGone'],
    },
  });
  setCurrentDetails(`Importing into ${input.modelId}.`);
  try {
    const r = await importer.importRemoteModel.executeWithOptions({ summary: `import into ${input.modelId}` }, [
      { uploadId: input.uploadId },
    ]);
    const message = `Imported ${r.files} file(s), ${r.bytes} bytes, as revision ${r.revisionId}.`;
    await bookkeeping.finishUpload({
      uploadId: input.uploadId,
      status: 'REMOTE_UPLOAD_STATUS_SUCCEEDED',
      message,
      revisionId: r.revisionId,
    });
    setCurrentDetails(message);
    searchableEnd('REMOTE_UPLOAD_STATUS_SUCCEEDED');
    return 'succeeded';
  } catch (err) {
    if (err instanceof ApplicationFailure && err.type === 'UploadGone') return 'failed';
    const message = reason(err);
    await bookkeeping.finishUpload({ uploadId: input.uploadId, status: 'REMOTE_UPLOAD_STATUS_FAILED', message });
    setCurrentDetails(`Failed: ${message}`);
    searchableEnd('REMOTE_UPLOAD_STATUS_FAILED');
    return 'failed';
  }
}
