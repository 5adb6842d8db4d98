/**
 * How a queue job is shown (the SDK's beta.jig.queue): its status, inputs, outputs and history.
 */
import type { JobRow } from '../../db/queue';

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : undefined);

export function toJobStatus(j: JobRow) {
  return {
    request_id: j.id,
    model: j.model,
    status: j.status,
    priority: Number(j.priority),
    retries: j.retries,
    info: j.info,
    inputs: j.payload,
    ...(j.outputs ? { outputs: j.outputs } : {}),
    ...(j.error ? { error: j.error } : {}),
    warnings: j.warnings,
    created_at: iso(j.created_at)!,
    ...(j.claimed_at ? { claimed_at: iso(j.claimed_at) } : {}),
    ...(j.done_at ? { done_at: iso(j.done_at) } : {}),
    history: j.history.map((h) => ({ ...h, at: new Date(h.at).toISOString() })),
  };
}
