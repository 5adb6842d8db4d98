-- Remote model uploads (SDK beta.models.uploads): a job that imports files from a
-- URL into a registered model as a new revision, run by the workflow
-- model-upload/<id>. Its events are what the importer did, in order. A source
-- credential is stored sealed (AES-256-GCM) and never returned or logged.

CREATE TABLE registry_uploads (
  id             text PRIMARY KEY,
  project_id     text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  model_id       text NOT NULL REFERENCES registry_models(id) ON DELETE CASCADE,
  remote_url     text NOT NULL,
  sealed_token   bytea,
  status         text NOT NULL DEFAULT 'REMOTE_UPLOAD_STATUS_PENDING',
  status_message text,
  restart_count  integer NOT NULL DEFAULT 0,
  max_restarts   integer NOT NULL,
  revision_id    text,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX registry_uploads_project ON registry_uploads (project_id, created_at DESC);

CREATE TABLE registry_upload_events (
  id         bigserial PRIMARY KEY,
  upload_id  text NOT NULL REFERENCES registry_uploads(id) ON DELETE CASCADE,
  level      text NOT NULL CHECK (level IN ('LEVEL_DEBUG', 'LEVEL_INFO', 'LEVEL_WARN', 'LEVEL_ERROR')),
  type       text NOT NULL,
  message    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX registry_upload_events_upload ON registry_upload_events (upload_id, id);
