-- Usage billing (GET /billing/usage). usage_records (007) is the ledger; each
-- record now says which resource it belongs to (attributes). Usage that
-- accrues over time (GPU-hours, replica-hours) is an open interval here,
-- opened and closed by the workflows' activities as resources change, and
-- turned into ledger records hour by hour: when it closes, and by the
-- usage-metering schedule while it stays open.

ALTER TABLE usage_records ADD COLUMN attributes jsonb NOT NULL DEFAULT '{}';

CREATE TABLE metered_intervals (
  id              bigserial PRIMARY KEY,
  organization_id text NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
  project_id      text REFERENCES projects(id) ON DELETE SET NULL,
  -- what is metered, e.g. cluster/<id>/on_demand or replica/<deployment>/<replica>
  meter_key       text NOT NULL,
  product         text NOT NULL,
  -- how many units accrue per hour (GPUs, replicas)
  units           numeric(20, 6) NOT NULL CHECK (units > 0),
  unit            text NOT NULL,
  unit_price      numeric(20, 9) NOT NULL,
  dimensions      jsonb NOT NULL DEFAULT '{}',
  attributes      jsonb NOT NULL DEFAULT '{}',
  started_at      timestamptz NOT NULL,
  -- usage before this instant is in usage_records already
  metered_until   timestamptz NOT NULL,
  ended_at        timestamptz
);
CREATE UNIQUE INDEX metered_intervals_one_open ON metered_intervals (meter_key) WHERE ended_at IS NULL;
CREATE INDEX metered_intervals_open ON metered_intervals (metered_until) WHERE ended_at IS NULL;
