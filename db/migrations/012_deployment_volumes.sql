-- Deployment volumes (SDK beta.jig.volumes): read-only content preloaded into
-- replicas at a mount path. A volume's content is files uploaded through the
-- Files API whose names start with a prefix; each create or content change is a
-- new version, and a version's file list is fixed when it is made (so replicas
-- of one revision always see the same files). The files are leased by the
-- volume (file_leases, holder deployment-volume/<id>) and cannot be deleted
-- while it exists.

CREATE TABLE deployment_volumes (
  id              text PRIMARY KEY,
  project_id      text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name            text NOT NULL,
  type            text NOT NULL DEFAULT 'readOnly' CHECK (type IN ('readOnly')),
  current_version integer NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);

CREATE TABLE deployment_volume_versions (
  volume_id     text NOT NULL REFERENCES deployment_volumes(id) ON DELETE CASCADE,
  version       integer NOT NULL,
  content_type  text NOT NULL DEFAULT 'files',
  source_prefix text NOT NULL,
  -- [{file_id, name, size, last_modified, blob_key}], as resolved when the version was made
  files         jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (volume_id, version)
);
