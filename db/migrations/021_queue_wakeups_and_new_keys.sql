-- Claim long-polls wait for a notification instead of querying the table over
-- and over: a job that becomes pending (submitted, or back in the queue after
-- its claim lapsed) notifies channel gantry_queue with its deployment's id.
CREATE FUNCTION notify_queue_job_pending() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gantry_queue', NEW.deployment_id);
  RETURN NULL;
END $$;

CREATE TRIGGER queue_jobs_pending
  AFTER INSERT OR UPDATE OF status ON queue_jobs
  FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION notify_queue_job_pending();

-- API processes now also cache that a key is unknown; a key created since must
-- work at once, so creating one notifies gantry_principals too.
CREATE TRIGGER api_keys_principal_created
  AFTER INSERT ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
