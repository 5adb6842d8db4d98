-- The organization's legacy key is shared by everyone who holds it, so it acts for no one: it
-- carried the user who regenerated it, and with them their roles (an organization admin's, when an
-- admin regenerated it) and their name on what the key did. Keys already made lose their user (the
-- UPDATE notifies gantry_principals, so cached principals are dropped), and none gets one again.
UPDATE api_keys SET user_id = NULL WHERE legacy AND user_id IS NOT NULL;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_legacy_without_user CHECK (NOT legacy OR user_id IS NULL);
