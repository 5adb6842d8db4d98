/**
 * batch (`batch/<id>`): one batch of model calls, from its validated input to its output and
 * error files, then their removal after the retention.
 *
 * The input is validated first (a bad line fails the batch before any call, its error file naming
 * the line), then run slice by slice (activities/batches.ts: each answer recorded as it comes, so
 * a retried slice redoes only lines with no answer). A run goes through `slicesPerRun` slices
 * and continues as new, so 100,000 lines keep the history small. Cancel (an Update, from
 * `POST /v1/batches/{id}/cancel`) and the deadline (`completion_window`) stop the slice running and
 * end the batch CANCELLED or EXPIRED with the lines answered so far in its output. Progress is
 * read from the batch's row, which the slices keep current.
 */
import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  continueAsNew,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setHandler,
  sleep,
} from '@temporalio/workflow';
import type { BatchActivities } from '../activities/batches';
import { BATCH_MESSAGES, type BatchStatus, type BatchWorkflowInput } from '../shared/batches';
import { continueAsNewWhenQuiet, StatusProjection } from './entity-kit';
import { failureMessage } from './failures';
import { BOOKKEEPING_OPTIONS, SLICE_OPTIONS } from './model-work';

/** Stops the batch: the slice running is cancelled, the batch ends CANCELLED with what it answered. */
export const cancelBatchUpdate = defineUpdate<void, []>(BATCH_MESSAGES.cancel);

const bookkeeping = proxyActivities<BatchActivities>(BOOKKEEPING_OPTIONS);
const lines = proxyActivities<BatchActivities>({
  ...SLICE_OPTIONS,
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
});

export async function batch(input: BatchWorkflowInput): Promise<void> {
  const { batchId } = input;
  let cancelled = false;
  setHandler(cancelBatchUpdate, () => {
    cancelled = true;
  });
  const status = new StatusProjection(input.carried ? 'IN_PROGRESS' : 'VALIDATING');
  let carried = input.carried;
  let ended: { status: BatchStatus; error?: string; errorFileId?: string } | undefined;

  if (!carried) {
    const validation = await bookkeeping.validateBatchInput({ batchId, sliceLines: input.sliceLines });
    if (!validation.ok) ended = { status: 'FAILED', error: validation.error, errorFileId: validation.errorFileId };
    else {
      carried = { slices: validation.slices, next: 0, totalLines: validation.totalLines };
      status.show('IN_PROGRESS', `${validation.totalLines} lines in ${validation.slices.length} slices.`);
    }
  }

  const deadline = Date.parse(input.deadline);
  for (let ran = 0; !ended && carried && carried.next < carried.slices.length; ran++) {
    if (cancelled) ended = { status: 'CANCELLED' };
    else if (Date.now() >= deadline) ended = { status: 'EXPIRED' };
    if (ended) break;
    if (ran >= input.slicesPerRun) {
      const next = { ...input, carried };
      await continueAsNewWhenQuiet(
        () => !cancelled,
        async () => undefined,
        () => continueAsNew<typeof batch>(next),
      );
      continue; // a cancel came meanwhile: the loop ends the batch
    }
    const slice = carried.slices[carried.next];
    const work = new CancellationScope();
    const watch = new CancellationScope();
    const running = work.run(() => lines.runBatchSlice({ batchId, slice }));
    const stopped = watch.run(() => condition(() => cancelled, deadline - Date.now()));
    const outcome = await Promise.race([
      running.then(
        () => 'done' as const,
        (err: unknown) => err,
      ),
      stopped.then(
        (wasCancelled) => (wasCancelled ? ('cancel' as const) : ('expire' as const)),
        () => 'done' as const, // the watch is cancelled only once the slice is done
      ),
    ]);
    if (outcome === 'done') {
      watch.cancel();
      carried.next++;
      status.show('IN_PROGRESS', `Slice ${carried.next} of ${carried.slices.length} done.`);
      continue;
    }
    if (outcome === 'cancel' || outcome === 'expire') {
      work.cancel();
      await running.catch(() => undefined); // the slice stops; what it answered stays answered
      ended = { status: outcome === 'cancel' ? 'CANCELLED' : 'EXPIRED' };
      break;
    }
    watch.cancel();
    if (isCancellation(outcome)) throw outcome;
    ended = { status: 'FAILED', error: failureMessage(outcome) };
  }
  ended ??= { status: 'COMPLETED' }; // every line has its answer

  await bookkeeping.finishBatch({ batchId, ...ended });
  status.show(ended.status, ended.error ?? `The batch ended ${ended.status}.`);
  // The files are kept for the retention, then removed with the input (the spec: 7 days).
  await sleep(input.retentionSeconds * 1000);
  await bookkeeping.removeBatchFiles({ batchId });
}
