-- A claim in one round trip (db/queue.ts claimNextJob). The claims of one queue are assigned one
-- at a time under a session advisory lock, so the claim order is the priority order exactly; the
-- lock is let go as soon as the row is taken (claims of different jobs then commit side by side),
-- and also when the UPDATE fails. Before this function the lock, the UPDATE and the unlock were
-- three statements, each a round trip to the server.
CREATE FUNCTION queue_claim_next(p_deployment text, p_token text, p_worker text, p_timeout_ms integer)
RETURNS SETOF queue_jobs LANGUAGE plpgsql AS $$
DECLARE
  lock_key integer := hashtext('queue:' || p_deployment);
  claimed queue_jobs;
BEGIN
  PERFORM pg_advisory_lock(lock_key);
  BEGIN
    UPDATE queue_jobs
       SET status = 'running', claim_token = p_token, claim_worker = p_worker, claim_timeout_ms = p_timeout_ms,
           claimed_at = clock_timestamp(),
           claim_expires_at = clock_timestamp() + make_interval(secs => p_timeout_ms / 1000.0),
           history = history || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
             'status', 'running', 'at', clock_timestamp(), 'note', p_worker)))
     WHERE id = (SELECT id FROM queue_jobs
                  WHERE deployment_id = p_deployment AND status = 'pending'
                  ORDER BY priority DESC, seq
                  LIMIT 1 FOR UPDATE SKIP LOCKED)
     RETURNING * INTO claimed;
  EXCEPTION WHEN OTHERS THEN
    PERFORM pg_advisory_unlock(lock_key);
    RAISE;
  END;
  PERFORM pg_advisory_unlock(lock_key);
  IF claimed.id IS NOT NULL THEN
    RETURN NEXT claimed;
  END IF;
END $$;
