-- Speech hosts that serve Whisper models an operator provided (GANTRY_SPEECH_MODEL_DIR): each
-- announces its models every few seconds while it runs and withdraws them when it stops, so the
-- API lists (and defaults to) only models some live host has. A host that died drops out when
-- its announcement is older than the API's window.
CREATE TABLE speech_hosts (
  host_id  text PRIMARY KEY,
  models   text[] NOT NULL,
  seen_at  timestamptz NOT NULL DEFAULT now()
);
