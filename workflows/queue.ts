/**
 * queueJob (`queue-job/<request_id>/claim-<n>`): the timers of one claim of a
 * queue job. It sleeps until the claim would expire; a worker that kept
 * sending updates has pushed the deadline on, so it sleeps again; a silent
 * worker loses the job (back to the queue, or failed after 3 retries). Once
 * the job has finished under this claim, it keeps the job for the retention
 * period and then deletes it (a job canceled while pending gets the retention
 * part only). Started inside the claim's transaction: a claim
 * that never committed leaves a workflow that finds itself superseded and ends.
 */
import { proxyActivities, setCurrentDetails, sleep } from '@temporalio/workflow';
import type { QueueActivities } from '../activities/queue';
import { CONTROL_TASK_QUEUE } from '../workers/task-queues';

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
