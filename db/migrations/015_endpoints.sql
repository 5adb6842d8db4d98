-- Dedicated endpoints (SDK beta.endpoints): an endpoint is a stable name
-- (`<project_slug>/<endpoint>` at the inference gateway) in front of one or more
-- deployments, with a traffic split. Each endpoint deployment is served by a
-- container deployment (its replicas run the model server), which is the entity
-- workflow deployment/<id>; what it does is recorded as endpoint events.

CREATE TABLE endpoints (
  id            text PRIMARY KEY,
  project_id    text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name          text NOT NULL,
  visibility    text NOT NULL DEFAULT 'VISIBILITY_PRIVATE' CHECK (visibility IN ('VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL')),
  -- [{deploymentId, weight}]; empty: traffic goes to the ready deployments evenly
  traffic_split jsonb NOT NULL DEFAULT '[]',
  etag          text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);

CREATE TABLE endpoint_deployments (
  id                      text PRIMARY KEY,
  endpoint_id             text NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  project_id              text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  name                    text NOT NULL,
  model                   text NOT NULL,
  model_id                text NOT NULL,
  model_revision_id       text,
  autoscaling             jsonb NOT NULL,
  enable_lora             boolean NOT NULL DEFAULT false,
  hardware                text NOT NULL,
  -- the container deployment serving it; gone once its replicas are stopped
  container_deployment_id text REFERENCES deployments(id) ON DELETE SET NULL,
  -- set when it could not be served at all (no weights on this installation)
  failure                 text,
  deleting                boolean NOT NULL DEFAULT false,
  etag                    text NOT NULL,
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  UNIQUE (endpoint_id, name)
);

CREATE TABLE endpoint_events (
  id            bigserial PRIMARY KEY,
  endpoint_id   text NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
  deployment_id text,
  level         text NOT NULL,
  source_kind   text NOT NULL,
  type          text NOT NULL,
  message       text NOT NULL,
  old_replicas  integer,
  new_replicas  integer,
  status        text,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX endpoint_events_endpoint ON endpoint_events (endpoint_id, id);
