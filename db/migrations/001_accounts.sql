-- Organizations, projects, users, memberships and API keys (spec: Authentication).

CREATE TABLE organizations (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  -- beta features are switched on per organization (e.g. GET /billing/usage)
  billing_usage_enabled boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE projects (
  id              text PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  name            text NOT NULL,
  -- DNS-friendly; forms `<project_slug>/<endpoint>` model strings
  slug            text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
  visibility      text NOT NULL DEFAULT 'private' CHECK (visibility IN ('open', 'closed', 'private')),
  is_default      boolean NOT NULL DEFAULT false,
  created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX projects_one_default_per_org ON projects (organization_id) WHERE is_default;

CREATE TABLE users (
  id                text PRIMARY KEY,
  email             text NOT NULL UNIQUE,
  name              text NOT NULL,
  -- operators of this Gantry installation (system status, self-checks)
  is_platform_admin boolean NOT NULL DEFAULT false,
  created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE organization_members (
  organization_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  user_id         text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role            text NOT NULL CHECK (role IN ('Admin', 'Developer')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, user_id)
);

CREATE TABLE project_members (
  project_id text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  user_id    text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('Admin', 'Editor')),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project_id, user_id)
);

CREATE TABLE api_keys (
  id           text PRIMARY KEY,
  project_id   text NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
  user_id      text REFERENCES users(id) ON DELETE SET NULL,
  name         text NOT NULL,
  -- SHA-256 of the secret; the secret itself is shown once and never stored
  key_hash     bytea NOT NULL UNIQUE,
  -- last characters of the secret, so a person can tell keys apart
  key_hint     text NOT NULL,
  legacy       boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_used_at timestamptz,
  revoked_at   timestamptz
);
CREATE INDEX api_keys_project ON api_keys (project_id);
