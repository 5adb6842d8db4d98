-- Credit and the usage ledger. Amounts are exact decimals (numeric), never floats.
-- The workflows that cause usage append to the ledger; remaining credit is the
-- organization's limit minus what the ledger holds.

ALTER TABLE organizations ADD COLUMN credit_limit numeric(20, 6) NOT NULL DEFAULT 100;

CREATE TABLE usage_records (
  id              bigserial PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id      text REFERENCES projects(id) ON DELETE SET NULL,
  product         text NOT NULL,
  resource_id     text,
  quantity        numeric(30, 6) NOT NULL,
  unit            text NOT NULL,
  unit_price      numeric(20, 9) NOT NULL,
  amount          numeric(20, 6) NOT NULL,
  dimensions      jsonb NOT NULL DEFAULT '{}',
  occurred_at     timestamptz NOT NULL DEFAULT now(),
  -- a retried activity records its usage once
  idempotency_key text NOT NULL UNIQUE
);
CREATE INDEX usage_records_org_time ON usage_records (organization_id, occurred_at);
