/**
 * evaluation (`evaluation/<id>`): one evaluation, from its file's rows to its results.
 *
 * The rows are read and checked first (a file that is not JSON rows, or a column a template or
 * model_to_evaluate names that no row has, ends it `user_error` before any call). Then slice by
 * slice each row is generated (when a model is to be evaluated) and judged
 * (activities/evaluations.ts: each row's outcome recorded as it comes, so a retried slice judges
 * only rows with no outcome), then the results are counted from the recorded outcomes and written
 * to the result file. Slices are few per evaluation (EVALUATION_MAX_ROWS / sliceRows), so the
 * history stays small without continuing as new. Progress is told in status_updates.
 */
import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { EvaluationActivities } from '../activities/evaluations';
import type { EvaluationWorkflowInput } from '../shared/evaluations';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';
import { StatusProjection } from './entity-kit';

const bookkeeping = proxyActivities<EvaluationActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

const rows = proxyActivities<EvaluationActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '6 hours',
  // A slice heartbeats every few seconds; a lost worker's slice is retried elsewhere soon after.
  heartbeatTimeout: '10 seconds',
  // Transient failures (a busy or restarting model) retry; a revoked key does not.
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', nonRetryableErrorTypes: ['ApiKeyRevoked'] },
});

/** The innermost message: what went wrong, without Temporal's wrapping. */
function reason(err: unknown): string {
  let e = err as { cause?: unknown; message?: string };
  while (e?.cause) e = e.cause as typeof e;
  return e?.message ?? String(err);
}

export async function evaluation(input: EvaluationWorkflowInput): Promise<void> {
  const { evaluationId } = input;
  const status = new StatusProjection('pending');
  const checked = await bookkeeping.checkEvaluationInput({ evaluationId });
  if (!checked.ok) {
    status.show('user_error', checked.error);
    return;
  }
  status.show('running', `${checked.totalRows} rows.`);
  try {
    for (let first = 0; first < checked.totalRows; first += input.sliceRows) {
      const last = Math.min(first + input.sliceRows, checked.totalRows);
      await rows.judgeEvaluationRows({ evaluationId, first, last });
      status.show('running', `${last} of ${checked.totalRows} rows judged.`);
    }
    await bookkeeping.finishEvaluation({ evaluationId });
    status.show('completed', 'Results counted; the result file is written.');
  } catch (err) {
    if (!(err instanceof ApplicationFailure) && !isActivityFailure(err)) throw err;
    await bookkeeping.failEvaluation({ evaluationId, error: reason(err) });
    status.show('error', reason(err));
  }
}

const isActivityFailure = (err: unknown) => (err as { name?: string })?.name === 'ActivityFailure';
