/**
 * The job queue's timers. queueDispatcher (`queue-dispatcher/<deployment id>`), one per queue,
 * holds them all: it sweeps the queue (lapsed claims back to the queue or failed, finished jobs
 * past retention deleted) and sleeps until the next claim deadline or retention end, or until a
 * claim or cancel that needs it sooner wakes it (db/queue.ts ensureDispatcherBy). With nothing
 * left to watch it ends; the next claim starts it again.
 *
 * queueJob, a workflow per claim, is what claims made before dispatchers started; it stays so
 * that their open runs finish.
 *
 * queueJob (`queue-job/<request_id>/claim-<n>`): the timers of one claim of a
 * queue job. It sleeps until the claim would expire; a worker that kept
 * sending updates has pushed the deadline on, so it sleeps again; a silent
 * worker loses the job (back to the queue, or failed after 3 retries). Once
 * the job has finished under this claim, it keeps the job for the retention
 * period and then deletes it (a job canceled while pending gets the retention
 * part only). Started inside the claim's transaction: a claim
 * that never committed leaves a workflow that finds itself superseded and ends.
 */
import {
  condition,
  continueAsNew,
  defineSignal,
  patched,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  sleep,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { QueueActivities } from '../activities/queue';
import { statusSearchAttributes } from '../shared/search-attributes';
import { PATCHES } from './patches';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

const queue = proxyActivities<QueueActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});

export interface QueueJobInput {
  jobId: string;
  /** The claim to watch; absent for a job canceled before any claim (retention only). */
  token?: string;
  claimTimeoutMs: number;
  retentionSeconds: number;
}

export async function queueJob(input: QueueJobInput): Promise<'requeued' | 'expired' | 'superseded'> {
  let wait = input.claimTimeoutMs;
  while (input.token) {
    setCurrentDetails(`Claimed; the worker must report within ${Math.round(wait / 1000)}s.`);
    await sleep(wait);
    const check = await queue.checkQueueClaim({ jobId: input.jobId, token: input.token });
    if (check.state === 'alive') {
      wait = Math.max(check.remainingMs, 50);
      continue;
    }
    if (check.state === 'requeued' || check.state === 'superseded') return check.state;
    break; // finished by the worker, or failed for good: keep it for the retention period
  }
  setCurrentDetails(`Finished; kept for ${input.retentionSeconds}s.`);
  await sleep(input.retentionSeconds * 1000);
  await queue.deleteQueueJob({ jobId: input.jobId });
  return 'expired';
}

export interface QueueDispatcherInput {
  deploymentId: string;
  retentionSeconds: number;
}

/** Look at the queue now: a claim or cancel needs it sooner than the dispatcher planned. */
export const wakeQueueDispatcher = defineSignal('wake');

/** Sweeps one run makes before it continues as new, keeping its history short. */
export const DISPATCHER_SWEEPS_PER_RUN = 50;

export async function queueDispatcher(input: QueueDispatcherInput): Promise<'idle'> {
  let woken = false;
  setHandler(wakeQueueDispatcher, () => void (woken = true));
  for (let sweeps = 1; ; sweeps++) {
    woken = false;
    const s = await queue.sweepQueue(input);
    if (s.nextInMs === null) {
      // Nothing to watch. A wake that came during the sweep (its claim committed after the sweep
      // read the queue) is looked at again; otherwise the run ends and the next claim starts one.
      if (woken) continue;
      setCurrentDetails('No claims held and no finished jobs kept: idle.');
      // The API started it `running`; the ended run says it ended (GantryPhase done).
      if (patched(PATCHES.queueDispatcherEndedStatus.id)) upsertSearchAttributes(statusSearchAttributes('completed'));
      return 'idle';
    }
    setCurrentDetails(
      `${s.running} claim(s) held; last sweep: ${s.requeued} back to the queue, ${s.failed} failed, ` +
        `${s.deleted} deleted; next look in ${Math.round(s.nextInMs / 1000)}s.`,
    );
    if (sweeps >= DISPATCHER_SWEEPS_PER_RUN || workflowInfo().continueAsNewSuggested) {
      return continueAsNew<typeof queueDispatcher>(input);
    }
    if (!woken) await condition(() => woken, Math.max(s.nextInMs, 50));
  }
}
