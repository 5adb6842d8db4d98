-- LoRA adapters attached to endpoint deployments (SDK beta.endpoints.adapters).
-- The workflow adapter-load/<deployment>/<adapter> loads the desired revision
-- onto every replica and keeps doing so as replicas come and go; this row is its
-- projection, per cluster (one here: `local`).

CREATE TABLE endpoint_adapters (
  deployment_id       text NOT NULL REFERENCES endpoint_deployments(id) ON DELETE CASCADE,
  adapter_model_id    text NOT NULL,
  desired_revision_id text NOT NULL,
  etag                text NOT NULL,
  cluster_id          text NOT NULL DEFAULT 'local',
  state               text NOT NULL DEFAULT 'ADAPTER_LOAD_STATE_PENDING',
  ready_pods          integer NOT NULL DEFAULT 0,
  failed_pods         integer NOT NULL DEFAULT 0,
  total_pods          integer NOT NULL DEFAULT 0,
  realized_revision_id text,
  realized_etag       text,
  adapter_valid       boolean NOT NULL DEFAULT true,
  adapter_valid_reason text,
  reason              text,
  message             text,
  loaded_at           timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (deployment_id, adapter_model_id)
);
