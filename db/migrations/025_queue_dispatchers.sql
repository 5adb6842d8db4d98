-- One dispatcher workflow per queue (workflows/queue.ts queueDispatcher) holds the timers of all
-- the queue's claims and retention periods, instead of a workflow per claim. wake_at is when it
-- will next look at the queue (NULL: it is not running); a claim or cancel that needs it sooner,
-- or finds it overdue, wakes it in the same transaction (db/queue.ts ensureDispatcherBy).
CREATE TABLE queue_dispatchers (
  deployment_id text PRIMARY KEY REFERENCES deployments(id) ON DELETE CASCADE,
  wake_at       timestamptz
);

-- What a sweep reads: the claims that may have lapsed, and finished jobs by age.
CREATE INDEX queue_jobs_claims_by_expiry ON queue_jobs (deployment_id, claim_expires_at) WHERE status = 'running';
CREATE INDEX queue_jobs_finished_by_age ON queue_jobs (deployment_id, done_at)
  WHERE status IN ('done', 'failed', 'canceled');
