-- Requests the inference gateway proxied to each deployment, per second: the
-- HTTPTotalRequests autoscaling signal (measured at Gantry's proxy, not in replicas).
CREATE TABLE deployment_request_counts (
  deployment_id text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  second        timestamptz NOT NULL,
  requests      bigint NOT NULL,
  PRIMARY KEY (deployment_id, second)
);
