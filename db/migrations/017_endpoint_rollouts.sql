-- Rollouts (SDK beta.endpoints.rollouts): shifting an endpoint's traffic from a
-- source deployment to a target deployment in steps. The workflow
-- rollout/<id> runs it; this row is its projection (written with a version that
-- only grows, so a late write never overwrites a newer one).

CREATE TABLE endpoint_rollouts (
  id                      text PRIMARY KEY,
  endpoint_id             text NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  project_id              text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  source_deployment_id    text NOT NULL,
  target_deployment_id    text NOT NULL,
  strategy                text NOT NULL,
  -- the create request with every default filled in (what the workflow runs)
  spec                    jsonb NOT NULL,
  state                   text NOT NULL DEFAULT 'ROLLOUT_STATE_PENDING',
  -- the SDK's Rollout.status: steps, totalSteps, condition, conditions
  status                  jsonb NOT NULL,
  current_step            integer,
  current_traffic_percent double precision,
  pause_info              jsonb,
  version                 bigint NOT NULL DEFAULT 0,
  etag                    text NOT NULL,
  created_at              timestamptz NOT NULL DEFAULT clock_timestamp(),
  started_at              timestamptz,
  completed_at            timestamptz,
  updated_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX endpoint_rollouts_endpoint ON endpoint_rollouts (endpoint_id, created_at DESC, id DESC);
-- At most one rollout of an endpoint is not finished (pending ones included).
CREATE UNIQUE INDEX endpoint_rollouts_one_active ON endpoint_rollouts (endpoint_id)
  WHERE state NOT IN ('ROLLOUT_STATE_COMPLETED', 'ROLLOUT_STATE_ABORTED', 'ROLLOUT_STATE_CANCELED');

-- What the inference gateway saw of each endpoint deployment, per second: the
-- rollout gates' router_error_rate, router_latency and inflight_requests.
-- latency_buckets counts requests per upper bound of ROUTER_LATENCY_BUCKETS_MS
-- (api/router-stats.ts), the last slot being everything above.
CREATE TABLE endpoint_router_stats (
  deployment_id  text NOT NULL REFERENCES endpoint_deployments(id) ON DELETE CASCADE,
  second         timestamptz NOT NULL,
  requests       integer NOT NULL,
  errors         integer NOT NULL,
  latency_ms_sum double precision NOT NULL,
  latency_ms_min double precision NOT NULL,
  latency_ms_max double precision NOT NULL,
  latency_buckets integer[] NOT NULL,
  PRIMARY KEY (deployment_id, second)
);

-- Operator fault injection at the gateway (like a service mesh's abort fault):
-- {abortPercent, httpStatus}; a share of the deployment's requests is answered
-- with that status without reaching a replica. For rollout drills.
ALTER TABLE endpoint_deployments ADD COLUMN fault_injection jsonb;

-- The thing an event is about beyond its deployment (a rollout's id), for the
-- events list's subjectId filter.
ALTER TABLE endpoint_events ADD COLUMN subject_id text;
