-- API processes cache what an API key resolves to (its principal). Any change
-- that could alter a principal (a key revoked or moved, a membership or role,
-- a project or organization renamed, a user made platform admin) notifies
-- channel gantry_principals, and every API process drops its cache at once.
-- last_used_at is not such a change: it is written once a minute per key.

CREATE FUNCTION notify_principals_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('gantry_principals', TG_TABLE_NAME);
  RETURN NULL;
END $$;

CREATE TRIGGER api_keys_principal_changed
  AFTER UPDATE OF project_id, user_id, key_hash, revoked_at OR DELETE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();

CREATE TRIGGER projects_principal_changed AFTER UPDATE OR DELETE ON projects
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER organizations_principal_changed AFTER UPDATE OR DELETE ON organizations
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER users_principal_changed AFTER UPDATE OR DELETE ON users
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER project_members_principal_changed AFTER INSERT OR UPDATE OR DELETE ON project_members
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
CREATE TRIGGER organization_members_principal_changed AFTER INSERT OR UPDATE OR DELETE ON organization_members
  FOR EACH STATEMENT EXECUTE FUNCTION notify_principals_changed();
