-- A container deployment's revision history (GET /v1/deployments/{id}/revisions, the SDK's
-- beta.jig list_revisions, retrieve_revision and rollback). A revision is what the replicas run:
-- the workflow counts one more each time a change alters the replica template, and the
-- projection of its state records the revision's spec here the first time it sees it. A
-- rollback re-applies an earlier revision's spec, which the workflow counts as the next revision;
-- it is recorded with action 'rollback' and the revision it came from.
CREATE TABLE deployment_revisions (
  deployment_id  text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  revision       integer NOT NULL,
  action         text NOT NULL CHECK (action IN ('create', 'update', 'rollback')),
  rolled_back_to integer,
  spec           jsonb NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (deployment_id, revision)
);
