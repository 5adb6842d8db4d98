/**
 * How an evaluation is shown: the evaluation job of the pinned SDKs, from its row.
 */
import type { EvaluationRow } from '../../db/evaluations';

export const toEvaluationJob = (e: EvaluationRow) => ({
  workflow_id: e.id,
  type: e.type,
  status: e.status,
  ...(e.user_id ? { owner_id: e.user_id } : {}),
  parameters: e.parameters,
  results: e.results,
  status_updates: e.status_updates,
  created_at: e.created_at.toISOString(),
  updated_at: e.updated_at.toISOString(),
});
