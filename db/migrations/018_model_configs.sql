-- Deployment profiles (SDK beta.models.configs, `cr_…`): immutable settings a
-- model family's server runs with. Public ones (project_id NULL) belong to the
-- installation; operators add more. A deployment of a model whose family has
-- more than one profile names the one it wants.
CREATE TABLE model_configs (
  id             text PRIMARY KEY,
  project_id     text REFERENCES projects(id) ON DELETE CASCADE,
  -- the model family it serves: a catalog base model name
  family         text NOT NULL,
  -- [{key, value}]: what the model server is started with (api/endpoint-serving.ts)
  selectors      jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX model_configs_family ON model_configs (family, created_at, id);

INSERT INTO model_configs (id, project_id, family, selectors, created_at) VALUES
  ('cr_reference-byte-tiny-fp32', NULL, 'gantry/reference-byte-tiny',
   '[{"key": "engine", "value": "gantry-reference-jax"}, {"key": "hardware", "value": "cpu"}, {"key": "dtype", "value": "float32"}]',
   '2026-01-01T00:00:00Z');

ALTER TABLE endpoint_deployments ADD COLUMN config_id text REFERENCES model_configs(id);
