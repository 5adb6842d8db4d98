/**
 * endpointRollout (`rollout/<id>`): shifts an endpoint's traffic from a source
 * deployment to a target deployment in steps. Each step (optionally) raises
 * the target's replicas, waits for the target to be ready, moves the traffic
 * split, soaks on a durable timer, then gates on what the inference gateway
 * measured (the rollout's metric rules and the built-in health limit). A
 * failed gate pauses the rollout itself (SYSTEM_PAUSED, with a failure
 * category) until an operator resumes, promotes or cancels it. Pause, resume,
 * promote and cancel are Updates whose validators enforce the SDK's state
 * rules. Completing moves all traffic to the target, lands the target's
 * replica floor and ceiling and drains the source to its final count;
 * cancelling freezes the split as it stands, or (CANCEL_DISPOSITION_REVERT)
 * moves the pair's traffic back to the source and restores both bounds.
 *
 * This file wires the Updates and the main loop, which only asks the entity;
 * what the rollout does lives in RolloutEntity (rollout-entity.ts).
 */
import { allHandlersFinished, condition, defineUpdate, patched, setHandler } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { ROLLOUT_MESSAGES, type RolloutState, type RolloutWorkflowInput } from '../shared/rollouts';
import { PAUSED_STATES, RolloutEntity } from './rollout-entity';

export const pauseRolloutUpdate = defineUpdate<void, [{ reason?: string }]>(ROLLOUT_MESSAGES.pause);
export const resumeRolloutUpdate = defineUpdate<void, []>(ROLLOUT_MESSAGES.resume);
export const promoteRolloutUpdate = defineUpdate<void, []>(ROLLOUT_MESSAGES.promote);
/** How a canceled rollout leaves traffic: frozen where it stands (the default), or reverted to the source. */
export type CancelDisposition = 'CANCEL_DISPOSITION_FREEZE' | 'CANCEL_DISPOSITION_REVERT';
export const cancelRolloutUpdate = defineUpdate<void, [{ reason: string; disposition?: CancelDisposition }]>(
  ROLLOUT_MESSAGES.cancel,
);

export async function endpointRollout(input: RolloutWorkflowInput): Promise<RolloutState> {
  const ended = await runRollout(input);
  // An Update that arrived as the rollout ended (a cancel racing its last step) finishes first: its
  // caller gets an answer, and what its handler records is not lost. (Before this patch the run
  // could close under a running handler.)
  if (patched(PATCHES.rolloutStatusAndHandlers.id)) await condition(allHandlersFinished);
  return ended;
}

async function runRollout(input: RolloutWorkflowInput): Promise<RolloutState> {
  const r = new RolloutEntity(input);

  // ---- messages ----
  setHandler(pauseRolloutUpdate, ({ reason }) => r.onPause(reason), {
    validator: r.allows('pause', ['ROLLOUT_STATE_RUNNING']),
  });
  setHandler(resumeRolloutUpdate, () => r.onResume(), { validator: r.allows('resume', PAUSED_STATES) });
  setHandler(promoteRolloutUpdate, () => r.onPromote(), {
    validator: r.allows('promote', ['ROLLOUT_STATE_RUNNING', ...PAUSED_STATES]),
  });
  setHandler(cancelRolloutUpdate, ({ reason, disposition }) => r.onCancel(reason, disposition), {
    validator: r.allows('cancel', ['ROLLOUT_STATE_RUNNING', ...PAUSED_STATES]),
  });

  // ---- life: the operator's command first, then the current step ----
  await r.start();
  for (;;) {
    const c = r.command;
    if (c?.kind === 'cancel') return r.cancel(c.reason, c.revert);
    if (c?.kind === 'promote') return r.complete('promoted');
    if (c?.kind === 'resume') r.resumed();
    if (c?.kind === 'pause') {
      await r.park('ROLLOUT_STATE_PAUSED', c.reason ?? 'paused by an operator');
      continue;
    }
    if (r.stepsDone()) return r.complete('passed');
    if (!(await r.applyStep())) continue;
    if ((await r.soakAndGate()) === 'last') return r.complete('passed');
  }
}
