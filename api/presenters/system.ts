/**
 * How installation health is shown: a self-check and its probes.
 */
import type { SelfCheckRow } from '../../db/system';

export function toSelfCheck(row: SelfCheckRow) {
  return {
    id: row.id,
    object: 'system.self_check' as const,
    status: row.status,
    workflow_id: row.workflow_id,
    created_at: new Date(row.created_at).toISOString(),
    completed_at: row.completed_at ? new Date(row.completed_at).toISOString() : null,
    probes: row.probes.map((p) => ({ ...p, updated_at: new Date(p.updated_at).toISOString() })),
  };
}
