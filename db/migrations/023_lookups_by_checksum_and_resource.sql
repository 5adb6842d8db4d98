-- The official SDKs send a file's SHA-256 before uploading it; a project that already holds those
-- bytes gets 409 with the existing file's id instead of a second copy.
CREATE INDEX files_project_sha256 ON files (project_id, sha256) WHERE sha256 IS NOT NULL;

-- A resource's charges (a fine-tuning job's `total_price`: its charge net of refunds).
CREATE INDEX usage_records_resource ON usage_records (resource_id) WHERE resource_id IS NOT NULL;
