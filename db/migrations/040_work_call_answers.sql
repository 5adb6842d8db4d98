-- The gateway's copy of each answered model call of a batch or an evaluation (issue 43), keyed by
-- the call the work names (`x-gantry-work-call`: a batch line, an evaluation row's generation or
-- judgment). A worker lost while its call was with the model asks again with the same key and gets
-- this answer: the model runs each line once and bills it once. The work's finishing activity
-- removes its rows once the answers are recorded in its own tables.
CREATE TABLE work_call_answers (
  work_kind     text NOT NULL,
  work_id       text NOT NULL,
  call_key      text NOT NULL,
  status        integer NOT NULL,
  content_type  text,
  body          bytea NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (work_kind, work_id, call_key)
);
