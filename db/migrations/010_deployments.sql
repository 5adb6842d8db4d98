-- Container deployments (spec: Container deployments; SDK beta.jig). The
-- deployment workflow owns replicas; it projects its state here, and the
-- replica activities record each replica's status as it changes. Secret values
-- are stored encrypted (AES-256-GCM) and never returned.

ALTER TABLE deployments
  ADD COLUMN workflow_id text,
  ADD COLUMN status      text NOT NULL DEFAULT 'Updating',
  ADD COLUMN state       jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN version     integer NOT NULL DEFAULT 0;

CREATE TABLE deployment_replicas (
  deployment_id text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  replica_id    text NOT NULL,
  revision      integer NOT NULL,
  image         text NOT NULL,
  status        text NOT NULL,
  reason        text,
  message       text,
  host          text,
  port          integer,
  ready_since   timestamptz,
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (deployment_id, replica_id)
);

CREATE TABLE deployment_secrets (
  id              text PRIMARY KEY,
  project_id      text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name            text NOT NULL,
  description     text,
  -- iv (12 bytes) || tag (16 bytes) || ciphertext
  sealed_value    bytea NOT NULL,
  created_by      text NOT NULL,
  last_updated_by text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);
