/** Activities of the queue's per-claim workflow: check a claim when its timer fires, and end a job's retention. */
import { checkClaim, deleteJob, type ClaimCheck } from '../db/queue';
import type { Db } from '../db/pool';

export function createQueueActivities({ db }: { db: Db }) {
  return {
    async checkQueueClaim({ jobId, token }: { jobId: string; token: string }): Promise<ClaimCheck> {
      return checkClaim(db, jobId, token);
    },
    async deleteQueueJob({ jobId }: { jobId: string }): Promise<void> {
      await deleteJob(db, jobId);
    },
  };
}

export type QueueActivities = ReturnType<typeof createQueueActivities>;
