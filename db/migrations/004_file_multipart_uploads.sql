-- Multipart uploads for large files (/v1/files/multipart/...): parts arrive on
-- pre-signed URLs in any order, then `complete` joins them into the file.

CREATE TABLE file_multipart_uploads (
  id          text PRIMARY KEY,
  file_id     text NOT NULL UNIQUE REFERENCES files(id) ON DELETE CASCADE,
  file_size   bigint NOT NULL,
  part_size   bigint NOT NULL,
  part_count  integer NOT NULL,
  state       text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'completing', 'completed', 'aborted')),
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE file_multipart_parts (
  upload_id   text NOT NULL REFERENCES file_multipart_uploads(id) ON DELETE CASCADE,
  part_number integer NOT NULL,
  bytes       bigint NOT NULL,
  -- the part's ETag: SHA-256 of its bytes
  sha256      text NOT NULL,
  blob_key    text NOT NULL,
  uploaded_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (upload_id, part_number)
);
