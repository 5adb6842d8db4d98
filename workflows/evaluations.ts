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
import { ActivityFailure, proxyActivities } from '@temporalio/workflow';
import type { EvaluationActivities } from '../activities/evaluations';
import type { EvaluationWorkflowInput } from '../shared/evaluations';
import { StatusProjection } from './entity-kit';
import { failureMessage } from './failures';
import { BOOKKEEPING_OPTIONS, SLICE_OPTIONS } from './model-work';

const bookkeeping = proxyActivities<EvaluationActivities>(BOOKKEEPING_OPTIONS);
const rows = proxyActivities<EvaluationActivities>(SLICE_OPTIONS);

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
    if (!(err instanceof ActivityFailure)) throw err;
    await bookkeeping.failEvaluation({ evaluationId, error: failureMessage(err) });
    status.show('error', failureMessage(err));
  }
}
