-- Blobs whose rows are gone, until the blobs are deleted (providers/storage/blob-deletions.ts).
-- A key is written in the transaction that removes the last row naming its blob; the blob is
-- deleted right after and the key forgotten. A process that dies in between, or storage that
-- refuses the delete, leaves the key here for the control worker's next round instead of a blob
-- on disk that nothing names any more.
CREATE TABLE blob_deletions (
  key          text PRIMARY KEY,
  scheduled_at timestamptz NOT NULL DEFAULT now()
);
