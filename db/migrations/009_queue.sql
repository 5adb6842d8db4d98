-- The asynchronous job queue (spec: Queue job; SDK beta.jig.queue). Jobs wait here,
-- in a table that can guarantee strict priority order under concurrent claims
-- (ORDER BY priority DESC, seq ... FOR UPDATE SKIP LOCKED). The timers of a
-- claimed job (claim timeout, then retention) live in Temporal (workflow queueJob).

-- Deployments a queue can name as its `model` (the container deployments issue fills in the rest).
CREATE TABLE deployments (
  id          text PRIMARY KEY,
  project_id  text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name        text NOT NULL,
  spec        jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);

CREATE TABLE queue_jobs (
  id               text PRIMARY KEY,
  project_id       text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  deployment_id    text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  model            text NOT NULL,
  status           text NOT NULL CHECK (status IN ('pending', 'running', 'done', 'failed', 'canceled')),
  priority         bigint NOT NULL,
  -- submission order; FIFO within a priority
  seq              bigserial,
  payload          jsonb NOT NULL,
  info             jsonb NOT NULL DEFAULT '{}',
  outputs          jsonb,
  error            text,
  retries          integer NOT NULL DEFAULT 0,
  warnings         text[] NOT NULL DEFAULT '{}',
  -- the current claim: who holds it, until when without an update
  claim_token      text,
  claim_worker     text,
  claim_timeout_ms integer,
  claim_expires_at timestamptz,
  -- status history (pending, running, retries, done ...) for operators and the status response
  history          jsonb NOT NULL DEFAULT '[]',
  created_at       timestamptz NOT NULL DEFAULT now(),
  claimed_at       timestamptz,
  done_at          timestamptz
);
CREATE INDEX queue_jobs_claim_order ON queue_jobs (deployment_id, priority DESC, seq) WHERE status = 'pending';
CREATE INDEX queue_jobs_active ON queue_jobs (deployment_id, status) WHERE status IN ('pending', 'running');
