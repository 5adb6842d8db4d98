-- A submitted job no longer notifies from inside its own transaction. NOTIFY takes a lock on the
-- whole database's notification queue at commit and holds it until the commit is on disk, so
-- every submit's commit waited for the one before it: half the submit rate that PostgreSQL has
-- without it (measured with bench/queue.ts's load). The API process that took the job wakes its
-- own waiting claims at once and notifies the others after the commit, one notification at a
-- time per queue (db/queue-wakeups.ts). A job that comes back to the queue (a lapsed claim, a
-- claim given back) still notifies from here: that is rare.
DROP TRIGGER queue_jobs_pending ON queue_jobs;
CREATE TRIGGER queue_jobs_back_to_pending
  AFTER UPDATE OF status ON queue_jobs
  FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IS DISTINCT FROM 'pending')
  EXECUTE FUNCTION notify_queue_job_pending();
