/**
 * What an operator sees of a run in the Temporal UI: its GantryStatus and
 * GantryPhase once the run has closed (they are set as it ends), and, when
 * GANTRY_RECORD_HISTORIES=1, its history recorded for the replay test.
 */
import type { Client } from '@temporalio/client';
import { SA_PHASE, SA_STATUS } from '../../shared/search-attributes';
import { eventually } from './platform';
import { recordHistoryIfAsked } from './workflow-env';

export async function searchedAsItEnded(
  temporal: Client,
  workflowId: string,
  record?: { type: string; label: string },
): Promise<{ status?: string; phase?: string }> {
  const handle = temporal.workflow.getHandle(workflowId);
  const d = await eventually(
    () => handle.describe(),
    (x) => x.status.name !== 'RUNNING',
    30_000,
  );
  if (record) await recordHistoryIfAsked(handle, record.type, record.label);
  return { status: d.typedSearchAttributes.get(SA_STATUS), phase: d.typedSearchAttributes.get(SA_PHASE) };
}
