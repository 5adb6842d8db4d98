-- Fine-tuning jobs (workflow `fine-tune/<ft-id>`) and what they produce.

CREATE TABLE fine_tunes (
  id                         text PRIMARY KEY,
  project_id                 text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  created_by                 text NOT NULL,
  status                     text NOT NULL CHECK (status IN ('pending', 'queued', 'running', 'compressing', 'uploading',
                                                              'cancel_requested', 'cancelled', 'error', 'completed')),
  -- every hyperparameter, resolved at create (common/fine-tunes.ts TrainingPlan)
  plan                       jsonb NOT NULL,
  model_output_name          text NOT NULL,
  token_count                bigint,
  trainingfile_numlines      integer,
  param_count                bigint,
  total_steps                integer,
  epochs_completed           integer NOT NULL DEFAULT 0,
  early_stopped              boolean NOT NULL DEFAULT false,
  early_stopping_best_step   integer,
  early_stopping_best_metric double precision,
  -- blob prefix of the final weights
  output_prefix              text,
  error                      text,
  created_at                 timestamptz NOT NULL DEFAULT now(),
  updated_at                 timestamptz NOT NULL DEFAULT now(),
  started_at                 timestamptz
);
CREATE INDEX fine_tunes_project ON fine_tunes (project_id, created_at DESC);

CREATE TABLE fine_tune_events (
  id         bigserial PRIMARY KEY,
  job_id     text NOT NULL REFERENCES fine_tunes(id) ON DELETE CASCADE,
  type       text NOT NULL,
  level      text NOT NULL DEFAULT 'info' CHECK (level IN ('info', 'warning', 'error')),
  message    text NOT NULL,
  step       integer,
  -- makes a retried activity's event a no-op instead of a duplicate
  dedup_key  text,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (job_id, dedup_key)
);
CREATE INDEX fine_tune_events_job ON fine_tune_events (job_id, id);

CREATE TABLE fine_tune_metrics (
  job_id        text NOT NULL REFERENCES fine_tunes(id) ON DELETE CASCADE,
  step          integer NOT NULL,
  epoch         integer,
  loss          double precision,
  learning_rate double precision,
  grad_norm     double precision,
  tokens        integer,
  eval_loss     double precision,
  reward_margin double precision,
  logged_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, step)
);

CREATE TABLE fine_tune_checkpoints (
  job_id          text NOT NULL REFERENCES fine_tunes(id) ON DELETE CASCADE,
  step            integer NOT NULL,
  epoch           integer,
  checkpoint_type text NOT NULL CHECK (checkpoint_type IN ('intermediate', 'final')),
  -- blob prefix holding the checkpoint's files
  blob_prefix     text NOT NULL,
  files           jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job_id, step, checkpoint_type)
);
