-- Evaluations (`/v1/evaluation`, issue 43): the read model of each evaluation's workflow
-- (`evaluation/<id>`), and each row's outcome (its generations, the judge's answers, the verdict),
-- recorded before the row counts as done: a worker lost mid-evaluation redoes only rows with no
-- outcome, and none is judged twice.
CREATE TABLE evaluations (
  id              text PRIMARY KEY,
  project_id      text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  api_key_id      text NOT NULL,
  user_id         text,
  type            text NOT NULL,
  -- As the request gave them, less the external API tokens (those are in sealed_tokens).
  parameters      jsonb NOT NULL,
  -- Each external token sealed (platform/keyring.ts) for its role ('judge', 'model_a', ...), base64.
  sealed_tokens   jsonb NOT NULL DEFAULT '{}',
  status          text NOT NULL,
  status_updates  jsonb NOT NULL DEFAULT '[]',
  results         jsonb,
  total_rows      integer,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evaluations_by_project ON evaluations (project_id, created_at DESC, id DESC);

CREATE TABLE evaluation_rows (
  evaluation_id text NOT NULL REFERENCES evaluations(id) ON DELETE CASCADE,
  row           integer NOT NULL,
  outcome       json NOT NULL, -- json, not jsonb: a generation may hold \u0000
  PRIMARY KEY (evaluation_id, row)
);
