-- How long the requests the gateway proxied took to answer, per deployment and second (the
-- HTTPAvgRequestDuration autoscaling signal): requests answered, and their summed milliseconds.
ALTER TABLE deployment_request_counts
  ADD COLUMN answered    integer NOT NULL DEFAULT 0,
  ADD COLUMN duration_ms double precision NOT NULL DEFAULT 0;
