-- Stored secrets (deployment_secrets.sealed_value, registry_uploads.sealed_token) are now sealed
-- bound to their row: AES-GCM's associated data names the table, column, project and row
-- (db/sealed-values.ts), so a value copied into another row does not open there. Values stored
-- before are bound by the first process that starts with the signing secret (SQL has no key to do
-- it here); this row says that is still to do, and that process deletes it when done. After that,
-- a value in the old form opens only once an operator binds it with scripts/reseal.ts.
CREATE TABLE sealed_values_to_bind (
  since timestamptz NOT NULL DEFAULT now()
);
INSERT INTO sealed_values_to_bind DEFAULT VALUES;
