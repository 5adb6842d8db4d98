-- A deployment's projection is ordered by (generation, version): version counts
-- the projections of one workflow run, generation counts the runs (continue-as-new).
-- Before this, version restarted at 0 in every new run and the guard dropped every
-- later projection of a long-lived deployment, freezing its row.
ALTER TABLE deployments ADD COLUMN generation integer NOT NULL DEFAULT 0;
