/**
 * modelFileUpload (`model-file-upload/<id>`): the life of one upload of local
 * weight files into the registry (the CLI's `tg models upload`). The API takes
 * the parts and, on `complete`, joins them into a revision; this run only
 * waits for that to end, and when the upload's time runs out first, removes
 * what its parts stored so an abandoned upload leaves nothing on disk.
 */
import { condition, defineSignal, proxyActivities, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import type { ModelFileUploadActivities } from '../activities/model-file-uploads';
import { statusSearchAttributes } from '../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export interface ModelFileUploadInput {
  uploadId: string;
  modelId: string;
  /** When the upload's part URLs expire (ISO); `complete` may come until twice that long after the start. */
  expiresAt: string;
  /** How long after `expiresAt` a `complete` is still awaited. */
  graceSeconds: number;
}

/** The API's `complete` ended the upload (a revision, or a refusal whose parts it removed). */
export const modelFilesFinishedSignal = defineSignal<[{ status: 'COMPLETED' | 'FAILED' }]>('modelFilesFinished');

const cleanup = proxyActivities<ModelFileUploadActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '10 minutes',
  // A `complete` still joining parts at the deadline is waited for (the activity says so by
  // failing) with a bounded back-off; retries add no events to the history.
  retry: { initialInterval: '5 seconds', maximumInterval: '5 minutes', backoffCoefficient: 2 },
});

export async function modelFileUpload(input: ModelFileUploadInput): Promise<'COMPLETED' | 'FAILED' | 'DISCARDED'> {
  let finished: 'COMPLETED' | 'FAILED' | 'DISCARDED' | undefined;
  setHandler(modelFilesFinishedSignal, ({ status }) => {
    finished ??= status;
  });
  upsertSearchAttributes(statusSearchAttributes('OPEN'));
  const deadline = Date.parse(input.expiresAt) + input.graceSeconds * 1000 - Date.now();
  if (!(await condition(() => finished !== undefined, Math.max(deadline, 1)))) {
    // Time ran out: the activity discards an open upload, or says how a `complete` that won the
    // race ended it (its signal may still be on the way).
    finished = await cleanup.discardExpiredModelFileUpload({ uploadId: input.uploadId });
  }
  upsertSearchAttributes(statusSearchAttributes(finished!));
  return finished!;
}
