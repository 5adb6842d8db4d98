-- A whole claim in one statement (db/queue.ts claimJob): find the project's deployment by name,
-- take its next job (queue_claim_next, migration 026), and make sure the queue's dispatcher looks
-- at the claim by its deadline (the upsert of db/queue.ts ensureDispatcherBy), all in the
-- statement's own transaction. The result says whether the dispatcher must be woken: the caller
-- does that after the commit, and gives the job back (db/queue.ts releaseClaim) if it cannot.
-- Before, a claim was a lookup of the deployment and then a transaction of four round trips.
--
-- No row: the project has no such deployment. A row whose job is NULL: its queue has no pending job.
CREATE FUNCTION queue_claim(p_project text, p_model text, p_token text, p_worker text, p_timeout_ms integer,
                            p_dispatcher_overdue interval)
RETURNS TABLE (claim_deployment text, claim_job queue_jobs, wake_dispatcher boolean) LANGUAGE plpgsql AS $$
DECLARE
  v_deployment text;
  v_job queue_jobs;
  v_wake boolean;
BEGIN
  SELECT d.id INTO v_deployment FROM deployments d WHERE d.project_id = p_project AND d.name = p_model;
  IF v_deployment IS NULL THEN
    RETURN;
  END IF;
  SELECT * INTO v_job FROM queue_claim_next(v_deployment, p_token, p_worker, p_timeout_ms);
  IF v_job.id IS NOT NULL THEN
    -- Locks the dispatcher's row whether or not the WHERE lets wake_at move, so a sweep deciding
    -- when to look next waits for this claim (see ensureDispatcherBy).
    INSERT INTO queue_dispatchers AS q (deployment_id, wake_at) VALUES (v_deployment, v_job.claim_expires_at)
      ON CONFLICT ON CONSTRAINT queue_dispatchers_pkey DO UPDATE SET wake_at = EXCLUDED.wake_at
      WHERE q.wake_at IS NULL OR q.wake_at > EXCLUDED.wake_at OR q.wake_at < clock_timestamp() - p_dispatcher_overdue
      RETURNING true INTO v_wake;
  END IF;
  RETURN QUERY SELECT v_deployment, CASE WHEN v_job.id IS NULL THEN NULL ELSE v_job END, coalesce(v_wake, false);
END $$;
