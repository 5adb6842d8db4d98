-- The model registry: weights a project owns (the SDK's beta.models objects).
-- A fine-tune registers its final model (and, for LoRA, its adapter) and its
-- intermediate checkpoints here. A revision's files are copies in the blob
-- store under registry/<ml>/<rv>/, so a model outlives the job that made it.

CREATE TABLE registry_models (
  id              text PRIMARY KEY,                  -- ml_...
  organization_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id      text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  -- unqualified; the qualified name is `<project_slug>/<name>`
  name            text NOT NULL,
  description     text,
  visibility      text NOT NULL DEFAULT 'VISIBILITY_PRIVATE' CHECK (visibility IN ('VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL')),
  weights_type    text NOT NULL CHECK (weights_type IN ('WEIGHTS_TYPE_DEFAULT', 'WEIGHTS_TYPE_ADAPTER', 'WEIGHTS_TYPE_SPECULATOR')),
  -- the catalog base model the weights derive from
  base_model      text,
  architecture    text,
  context_length  integer,
  parameters_total bigint,
  source_fine_tune_id text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (project_id, name)
);
CREATE INDEX registry_models_project ON registry_models (project_id, created_at DESC);

CREATE TABLE registry_model_revisions (
  id                text PRIMARY KEY,                -- rv_...
  model_id          text NOT NULL REFERENCES registry_models(id) ON DELETE CASCADE,
  blob_prefix       text NOT NULL,
  validation_status text NOT NULL DEFAULT 'REVISION_VALIDATION_STATUS_PENDING',
  created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX registry_model_revisions_model ON registry_model_revisions (model_id, created_at DESC);

CREATE TABLE registry_model_files (
  revision_id text NOT NULL REFERENCES registry_model_revisions(id) ON DELETE CASCADE,
  path        text NOT NULL,
  size_bytes  bigint NOT NULL,
  sha256      text NOT NULL,
  PRIMARY KEY (revision_id, path)
);

-- What a fine-tune registered (ids survive a deleted model as NULL: the name stays, unresolvable).
ALTER TABLE fine_tunes
  ADD COLUMN model_object_id            text REFERENCES registry_models(id) ON DELETE SET NULL,
  ADD COLUMN model_object_revision_id   text REFERENCES registry_model_revisions(id) ON DELETE SET NULL,
  ADD COLUMN adapter_object_id          text REFERENCES registry_models(id) ON DELETE SET NULL,
  ADD COLUMN adapter_object_revision_id text REFERENCES registry_model_revisions(id) ON DELETE SET NULL,
  ADD COLUMN adapter_output_name        text;

ALTER TABLE fine_tune_checkpoints
  ADD COLUMN object_id          text REFERENCES registry_models(id) ON DELETE SET NULL,
  ADD COLUMN object_revision_id text REFERENCES registry_model_revisions(id) ON DELETE SET NULL,
  ADD COLUMN object_name        text;
