/**
 * Activities of the queue's workflows: the dispatcher's sweep of a queue, and (for claims made
 * before dispatchers, whose queueJob runs may still be open) a claim's check and a job's deletion.
 */
import { checkClaim, deleteJob, sweepQueue, type ClaimCheck, type Sweep } from '../db/queue';
import type { Db } from '../db/pool';

export function createQueueActivities({ db }: { db: Db }) {
  return {
    async sweepQueue({
      deploymentId,
      retentionSeconds,
    }: {
      deploymentId: string;
      retentionSeconds: number;
    }): Promise<Sweep> {
      return sweepQueue(db, deploymentId, retentionSeconds);
    },
    async checkQueueClaim({ jobId, token }: { jobId: string; token: string }): Promise<ClaimCheck> {
      return checkClaim(db, jobId, token);
    },
    async deleteQueueJob({ jobId }: { jobId: string }): Promise<void> {
      await deleteJob(db, jobId);
    },
  };
}

export type QueueActivities = ReturnType<typeof createQueueActivities>;
