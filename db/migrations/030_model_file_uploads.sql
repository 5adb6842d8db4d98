-- Local weight files uploaded into the model registry (the Python CLI's `tg models upload`:
-- POST /v2/projects/{p}/models/upload/create, a signed PUT per part, then .../complete). One
-- upload is one create call: the files it names, each in parts whose MD5 is its ETag (the CLI
-- checks each file's multipart ETag against the parts). The model is named, not referenced: a
-- model deleted while its upload is open must not take the rows that say which blobs to remove.
-- The upload's workflow (model-file-upload/<id>) removes the parts of one never completed.
CREATE TABLE model_file_uploads (
  id              text PRIMARY KEY,
  project_id      text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  model_id        text NOT NULL,
  -- the revision a completed upload becomes (fixed at create, so a crash mid-complete leaves
  -- blobs whose place the expiry knows)
  revision_id     text NOT NULL UNIQUE,
  state           text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'completing', 'completed', 'failed', 'expired')),
  state_since     timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE model_file_upload_files (
  upload_id  text NOT NULL REFERENCES model_file_uploads(id) ON DELETE CASCADE,
  path       text NOT NULL,
  -- the client's multipart ETag of the whole file: MD5 of one part, else MD5 of the parts' MD5s and -<count>
  etag       text NOT NULL,
  part_count integer NOT NULL,
  PRIMARY KEY (upload_id, path)
);

CREATE TABLE model_file_upload_parts (
  upload_id   text NOT NULL,
  path        text NOT NULL,
  part_number integer NOT NULL,
  bytes       bigint NOT NULL,
  md5         text NOT NULL,
  blob_key    text NOT NULL,
  PRIMARY KEY (upload_id, path, part_number),
  FOREIGN KEY (upload_id, path) REFERENCES model_file_upload_files(upload_id, path) ON DELETE CASCADE
);

-- The multipart ETag of a registry file that came through such an upload, so a download can give
-- the CLI the hash it compares a local copy with (and skip one it already has).
ALTER TABLE registry_model_files ADD COLUMN etag text;
