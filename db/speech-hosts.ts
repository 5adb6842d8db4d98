/** Speech hosts' announcements of the operator-provided models they serve (migration 031). */
import type { Queryable } from './pool';

/** How often a host announces itself, and how old an announcement may be before its host counts as gone. */
export const SPEECH_HOST_ANNOUNCE_SECONDS = 10;
export const SPEECH_HOST_GONE_SECONDS = 45;

export async function announceSpeechHost(db: Queryable, hostId: string, models: string[]): Promise<void> {
  await db.query(
    `INSERT INTO speech_hosts (host_id, models) VALUES ($1, $2)
     ON CONFLICT (host_id) DO UPDATE SET models = EXCLUDED.models, seen_at = now()`,
    [hostId, models],
  );
}

export async function withdrawSpeechHost(db: Queryable, hostId: string): Promise<void> {
  await db.query('DELETE FROM speech_hosts WHERE host_id = $1', [hostId]);
}

/** The model ids some live host serves. */
export async function announcedSpeechModels(db: Queryable): Promise<Set<string>> {
  const { rows } = await db.query<{ model: string }>(
    `SELECT DISTINCT unnest(models) AS model FROM speech_hosts WHERE seen_at > now() - make_interval(secs => $1)`,
    [SPEECH_HOST_GONE_SECONDS],
  );
  return new Set(rows.map((r) => r.model));
}
