-- Batches (`/v1/batches`, issue 43): the read model of each batch's workflow (`batch/<id>`), and
-- each line's answer, recorded before the line counts as done: a worker lost mid-batch redoes
-- only the lines with no answer, and none is answered twice.
CREATE TABLE batches (
  id                text PRIMARY KEY,
  project_id        text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  api_key_id        text NOT NULL,
  user_id           text,
  endpoint          text NOT NULL,
  input_file_id     text NOT NULL,
  output_file_id    text,
  error_file_id     text,
  model_id          text,
  completion_window text NOT NULL,
  priority          integer,
  status            text NOT NULL,
  error             text,
  file_size_bytes   bigint,
  total_lines       integer,
  done_lines        integer NOT NULL DEFAULT 0,
  created_at        timestamptz NOT NULL DEFAULT now(),
  job_deadline      timestamptz NOT NULL,
  completed_at      timestamptz
);
CREATE INDEX batches_by_project ON batches (project_id, created_at DESC, id DESC);

CREATE TABLE batch_answers (
  batch_id    text NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
  line        integer NOT NULL,
  custom_id   text NOT NULL,
  status_code integer,
  body        json, -- json, not jsonb: an answer may hold \u0000 (a byte model can say anything)
  error       text,
  PRIMARY KEY (batch_id, line)
);
