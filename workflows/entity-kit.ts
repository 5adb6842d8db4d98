/**
 * The steps every entity workflow (clusters, deployments, rollouts, adapter
 * loads) takes the same way, written once: refusing an Update from its
 * validator, projecting a status change, continuing as new when quiet, and
 * compensating when a run fails unexpectedly. Workflow code: each helper
 * issues exactly the commands its callers issued inline before (a move of
 * code changes no command; test/replay proves it).
 */
import {
  ApplicationFailure,
  CancellationScope,
  ContinueAsNew,
  allHandlersFinished,
  condition,
  setCurrentDetails,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { statusSearchAttributes } from '../shared/search-attributes';
import type { UpdateRejection } from '../shared/update-rejections';

/**
 * An Update validator's refusal. The API answers it as the error it means (api/workflows.ts
 * updateRejection): `invalid` a 400 naming `param`, `notFound` a 404, `conflict` a 409; `code`,
 * when given, is the error code of that answer. A validator's refusal writes no history, so what
 * it says can change without a patch.
 */
export function refuse(
  type: UpdateRejection,
  message: string,
  opts: { param?: string; code?: string } = {},
): ApplicationFailure {
  const details: (string | null)[] = [];
  if (opts.param || opts.code) details.push(opts.param ?? null);
  if (opts.code) details.push(opts.code);
  return ApplicationFailure.create({ type, message, details, nonRetryable: true });
}

/**
 * The status operators see: the search attributes (GantryStatus/GantryPhase), upserted only when
 * the status changes, and the current details, set on every projection. `since` is the status the
 * run was started with, if any (the API sets it at start); `gate` is asked only when the status
 * changed, for entities whose upsert came behind a patch.
 */
export class StatusProjection {
  constructor(
    private searched = '',
    private readonly gate: () => boolean = () => true,
  ) {}

  show(status: string, details: string): void {
    if (status !== this.searched && this.gate()) {
      upsertSearchAttributes(statusSearchAttributes(status));
      this.searched = status;
    }
    setCurrentDetails(details);
  }

  /**
   * The run's last word: the status it ended with (a Deleted, Failed or detached entity), upserted
   * whatever was searched before, so a search for active work never lists a finished run. Callers
   * put it behind their entity's patch: runs recorded before ended without it.
   */
  end(status: string, details: string): void {
    upsertSearchAttributes(statusSearchAttributes(status));
    this.searched = status;
    setCurrentDetails(details);
  }
}

/**
 * Hands the entity over to a new run, but only when nothing would be lost at the hand-over: every
 * handler has finished, and `quiet` (what is not carried: a delete, a notice, a wake) still holds
 * after the last projection. A message that arrives while projecting stays with this run; the
 * caller's loop goes on and asks again later. Returns only when it did not continue.
 */
export async function continueAsNewWhenQuiet(
  quiet: () => boolean,
  project: () => Promise<void>,
  next: () => Promise<never>,
): Promise<void> {
  await condition(allHandlersFinished);
  if (!quiet()) return;
  await project();
  if (quiet() && allHandlersFinished()) await next();
}

/**
 * Runs an entity's life so that nothing is left running unowned: if it fails unexpectedly (a bug,
 * an activity that gave up, a cancellation from the Temporal UI), `compensate` runs where nothing
 * can cancel it, then the run fails with the same error. A continue-as-new passes through (the
 * hand-over to the next run, not a failure). `since` is the entity's patch (`() =>
 * patched(PATCHES.x.id)`): runs recorded before it failed without compensating, and still do.
 */
export async function compensateOnFailure(
  since: () => boolean,
  life: () => Promise<void>,
  compensate: (err: unknown) => Promise<void>,
): Promise<void> {
  try {
    await life();
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err;
    if (!since()) throw err;
    await CancellationScope.nonCancellable(() => compensate(err));
    throw err;
  }
}
