-- Read model of the system self-check workflow (workflow id `system-self-check/<id>`).

CREATE TABLE system_self_checks (
  id           text PRIMARY KEY,
  project_id   text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  workflow_id  text NOT NULL UNIQUE,
  status       text NOT NULL CHECK (status IN ('running', 'passed', 'failed')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX system_self_checks_project ON system_self_checks (project_id, created_at DESC);

-- One row per task queue the check visited.
CREATE TABLE system_self_check_probes (
  check_id    text NOT NULL REFERENCES system_self_checks(id) ON DELETE CASCADE,
  task_queue  text NOT NULL,
  status      text NOT NULL CHECK (status IN ('pending', 'ok', 'no_worker', 'failed')),
  -- what the worker that ran the probe reported about its host
  host        jsonb,
  detail      text,
  latency_ms  integer,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (check_id, task_queue)
);
