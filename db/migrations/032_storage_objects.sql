-- Storage objects (the Python CLI's `beta jig volumes create/update` upload through
-- /v1/storage/*): files of a project by path, each upload its own row and blob. The newest
-- uploaded row of a path is the object; a volume version whose prefix names a directory of
-- objects holds the rows it was made from, so a later upload to the same path never changes it.

CREATE TABLE storage_objects (
  id          text PRIMARY KEY,
  project_id  text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  path        text NOT NULL,
  blob_key    text, -- set with its bytes (each PUT attempt writes a blob of its own)
  bytes       bigint,
  created_at  timestamptz NOT NULL DEFAULT now(),
  -- Set when its bytes arrived (the signed PUT); NULL while the upload is only granted.
  uploaded_at timestamptz
);

CREATE INDEX storage_objects_by_path ON storage_objects (project_id, path, uploaded_at DESC)
  WHERE uploaded_at IS NOT NULL;

-- The parts of an object uploaded in parts (the CLI's way for files of 100 MiB and more), until
-- `complete` joins them into the object's blob or `abort` drops them.
CREATE TABLE storage_object_parts (
  object_id   text NOT NULL REFERENCES storage_objects(id) ON DELETE CASCADE,
  part_number integer NOT NULL,
  blob_key    text NOT NULL,
  bytes       bigint NOT NULL,
  md5         text NOT NULL,
  PRIMARY KEY (object_id, part_number)
);
