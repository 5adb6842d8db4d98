-- Uploaded files (spec: Files) and their validation (workflow `file-validation/<file-id>`).

CREATE TABLE files (
  id                text PRIMARY KEY,
  project_id        text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  -- the name as uploaded: metadata only, never part of a storage path
  filename          text NOT NULL,
  purpose           text NOT NULL CHECK (purpose IN ('fine-tune', 'calibration', 'eval', 'batch-api')),
  file_type         text NOT NULL CHECK (file_type IN ('csv', 'jsonl', 'parquet')),
  blob_key          text NOT NULL UNIQUE,
  -- set once the bytes are stored
  bytes             bigint,
  sha256            text,
  uploaded_at       timestamptz,
  processing_status text NOT NULL DEFAULT 'PENDING'
                    CHECK (processing_status IN ('PENDING', 'QUEUED', 'RUNNING', 'COMPLETED', 'FAILED', 'INVALID_FORMAT')),
  -- a sentence for people: why validation was skipped, or why it could not finish
  processing_note   text,
  validation_report jsonb,
  created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX files_project ON files (project_id, created_at DESC);

-- Every processing_status move, in order.
CREATE TABLE file_status_events (
  id         bigserial PRIMARY KEY,
  file_id    text NOT NULL REFERENCES files(id) ON DELETE CASCADE,
  status     text NOT NULL,
  message    text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX file_status_events_file ON file_status_events (file_id, id);

-- A job that reads a file while it runs holds a lease on it; a leased file cannot be deleted.
CREATE TABLE file_leases (
  file_id    text NOT NULL REFERENCES files(id) ON DELETE CASCADE,
  holder     text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (file_id, holder)
);

-- Single-use pre-signed upload URLs (the official SDKs' upload flow).
CREATE TABLE file_upload_tokens (
  id          text PRIMARY KEY,
  file_id     text NOT NULL REFERENCES files(id) ON DELETE CASCADE,
  max_bytes   bigint NOT NULL,
  exact_bytes bigint,
  expires_at  timestamptz NOT NULL,
  used_at     timestamptz
);
CREATE INDEX file_upload_tokens_file ON file_upload_tokens (file_id);
