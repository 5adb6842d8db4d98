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
 */
import {
  allHandlersFinished,
  condition,
  defineUpdate,
  getExternalWorkflowHandle,
  proxyActivities,
  patched,
  setHandler,
} from '@temporalio/workflow';
import { PATCHES } from './patches';
import { StatusProjection, refuse } from './entity-kit';
import type { RolloutActivities } from '../activities/rollouts';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import { deploymentWorkflowId } from '../shared/deployments';
import {
  ROLLOUT_MESSAGES,
  type RolloutSnapshot,
  type RolloutState,
  type RolloutWorkflowInput,
  type StepRecord,
} from '../shared/rollouts';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';
import { setReplicaBoundsSignal } from './deployments';

export const pauseRolloutUpdate = defineUpdate<void, [{ reason?: string }]>(ROLLOUT_MESSAGES.pause);
export const resumeRolloutUpdate = defineUpdate<void, []>(ROLLOUT_MESSAGES.resume);
export const promoteRolloutUpdate = defineUpdate<void, []>(ROLLOUT_MESSAGES.promote);
/** How a canceled rollout leaves traffic: frozen where it stands (the default), or reverted to the source. */
export type CancelDisposition = 'CANCEL_DISPOSITION_FREEZE' | 'CANCEL_DISPOSITION_REVERT';
export const cancelRolloutUpdate = defineUpdate<void, [{ reason: string; disposition?: CancelDisposition }]>(
  ROLLOUT_MESSAGES.cancel,
);

const control = proxyActivities<RolloutActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** How often a rollout looks again at a target that is not ready yet. */
const READY_POLL_SECONDS = 2;

type Command =
  | { kind: 'pause'; reason?: string }
  | { kind: 'resume' }
  | { kind: 'promote' }
  | { kind: 'cancel'; reason: string; revert: boolean };

export async function endpointRollout(input: RolloutWorkflowInput): Promise<RolloutState> {
  const ended = await runRollout(input);
  // An Update that arrived as the rollout ended (a cancel racing its last step) finishes first: its
  // caller gets an answer, and what its handler records is not lost. (Before this patch the run
  // could close under a running handler.)
  if (patched(PATCHES.rolloutStatusAndHandlers.id)) await condition(allHandlersFinished);
  return ended;
}

async function runRollout(input: RolloutWorkflowInput): Promise<RolloutState> {
  const { plan } = input;
  const pair = {
    rolloutId: input.rolloutId,
    endpointId: input.endpointId,
    sourceDeploymentId: input.sourceDeploymentId,
    targetDeploymentId: input.targetDeploymentId,
  };
  const now = () => new Date().toISOString();
  const startedAtMs = Date.now();
  const snap: RolloutSnapshot = {
    state: 'ROLLOUT_STATE_RUNNING',
    currentStep: 0,
    currentTrafficPercent: 0,
    startedAt: now(),
    steps: plan.steps.map((s, i): StepRecord => ({
      stepIndex: i,
      targetTrafficPercent: s.traffic,
      state: 'ROLLOUT_STEP_STATE_PENDING',
    })),
  };
  let version = 0;
  // The state operators search by (GantryStatus/GantryPhase); the API sets RUNNING at start.
  // (Before this patch the search attributes kept the state the rollout started in.)
  const status = new StatusProjection('ROLLOUT_STATE_RUNNING', () => patched(PATCHES.rolloutStatusAndHandlers.id));
  const record = async () => {
    status.show(
      snap.state,
      `**${snap.state}** step ${snap.currentStep}/${plan.steps.length}, ${snap.currentTrafficPercent}% to ${pair.targetDeploymentId}`,
    );
    await control.recordRollout({ rolloutId: input.rolloutId, version: ++version, snapshot: snap });
  };
  const event = (type: string, message: string, level: 'LEVEL_INFO' | 'LEVEL_WARN' | 'LEVEL_ERROR' = 'LEVEL_INFO') =>
    control.rolloutEvent({ ...pair, type, message, level });
  const live = () => snap.steps[snap.currentStep ?? 0];

  let command: Command | null = null;
  const allow =
    (what: string, states: RolloutState[]) =>
    (..._args: unknown[]) => {
      if (!states.includes(snap.state))
        throw refuse(UPDATE_REJECTIONS.conflict, `Cannot ${what} a rollout that is ${snap.state}.`, {
          code: 'rollout_state',
        });
    };
  const PAUSED_STATES: RolloutState[] = [
    'ROLLOUT_STATE_PAUSING',
    'ROLLOUT_STATE_PAUSED',
    'ROLLOUT_STATE_SYSTEM_PAUSED',
  ];
  setHandler(
    pauseRolloutUpdate,
    async ({ reason }) => {
      command = { kind: 'pause', reason };
      snap.state = 'ROLLOUT_STATE_PAUSING';
      snap.pauseInfo = { pausedAt: now(), ...(reason ? { reason } : {}) };
      await record();
    },
    { validator: allow('pause', ['ROLLOUT_STATE_RUNNING']) },
  );
  setHandler(
    resumeRolloutUpdate,
    async () => {
      command = { kind: 'resume' };
      snap.state = 'ROLLOUT_STATE_RUNNING';
      snap.pauseInfo = undefined;
      snap.condition = undefined;
      if (live().state !== 'ROLLOUT_STEP_STATE_PENDING') {
        live().state = 'ROLLOUT_STEP_STATE_RUNNING';
        live().failureReason = undefined;
      }
      await record();
      await event('rollout.resumed', `Rollout ${input.rolloutId} resumed at step ${snap.currentStep}.`);
    },
    { validator: allow('resume', PAUSED_STATES) },
  );
  setHandler(
    promoteRolloutUpdate,
    () => {
      command = { kind: 'promote' };
    },
    { validator: allow('promote', ['ROLLOUT_STATE_RUNNING', ...PAUSED_STATES]) },
  );
  setHandler(
    cancelRolloutUpdate,
    async ({ reason, disposition }) => {
      command = { kind: 'cancel', reason, revert: disposition === 'CANCEL_DISPOSITION_REVERT' };
      snap.state = 'ROLLOUT_STATE_CANCELLING';
      await record();
    },
    { validator: allow('cancel', ['ROLLOUT_STATE_RUNNING', ...PAUSED_STATES]) },
  );

  /** New replica bounds for one of the pair: noted on the endpoint deployment, sent to its workflow. */
  async function bounds(which: 'source' | 'target', min: number, max: number, why: string) {
    const containerId = which === 'source' ? input.sourceContainerId : input.targetContainerId;
    const deploymentId = which === 'source' ? input.sourceDeploymentId : input.targetDeploymentId;
    await control.noteRolloutReplicas({ ...pair, deploymentId, min, max, why });
    if (!containerId) return;
    try {
      await getExternalWorkflowHandle(deploymentWorkflowId(containerId)).signal(setReplicaBoundsSignal, {
        min_replicas: min,
        max_replicas: max,
      });
    } catch {
      // Its workflow is gone (the deployment was deleted); the gate reports the target, and a gone source needs nothing.
    }
  }

  /** Waits for the target to be ready: 'ready', 'interrupted' by a command, or 'timeout' with the last reason. */
  async function targetReady(
    minReady?: number,
  ): Promise<{ outcome: 'ready' | 'interrupted' | 'timeout'; message: string }> {
    const deadline = Date.now() + input.targetReadyTimeoutSeconds * 1000;
    for (;;) {
      const health = await control.rolloutTargetHealth({ ...pair, minReady });
      if (health.ready) return { outcome: 'ready', message: health.message };
      if (Date.now() >= deadline) return { outcome: 'timeout', message: health.message };
      if (await condition(() => command !== null, `${READY_POLL_SECONDS} seconds`))
        return { outcome: 'interrupted', message: '' };
    }
  }

  /** Parks the rollout until a command other than pause arrives (resume, promote or cancel). */
  async function park(state: 'ROLLOUT_STATE_PAUSED' | 'ROLLOUT_STATE_SYSTEM_PAUSED', reason: string) {
    snap.state = state;
    snap.pauseInfo = snap.pauseInfo ?? { pausedAt: now(), reason };
    if (live().state === 'ROLLOUT_STEP_STATE_RUNNING') live().state = 'ROLLOUT_STEP_STATE_PAUSED';
    await record();
    await event(
      state === 'ROLLOUT_STATE_PAUSED' ? 'rollout.paused' : 'rollout.system_paused',
      `Rollout ${input.rolloutId} ${state === 'ROLLOUT_STATE_PAUSED' ? 'paused' : 'paused itself'} at step ${snap.currentStep}: ${reason}`,
      state === 'ROLLOUT_STATE_PAUSED' ? 'LEVEL_INFO' : 'LEVEL_WARN',
    );
    await condition(() => command !== null && command.kind !== 'pause');
  }

  async function systemPause(
    category: NonNullable<RolloutSnapshot['condition']>['category'],
    message: string,
    metrics = live().metrics,
  ) {
    live().state = 'ROLLOUT_STEP_STATE_FAILED';
    live().failureReason = message;
    snap.condition = {
      atStep: snap.currentStep,
      category,
      message,
      observedAt: now(),
      ...(metrics ? { metrics } : {}),
    };
    snap.pauseInfo = { pausedAt: now(), reason: message };
    await park('ROLLOUT_STATE_SYSTEM_PAUSED', message);
  }

  async function complete(how: 'promoted' | 'passed'): Promise<RolloutState> {
    snap.state = 'ROLLOUT_STATE_STABILIZING';
    for (const s of snap.steps) {
      if (s.state === 'ROLLOUT_STEP_STATE_PASSED') continue;
      s.state = 'ROLLOUT_STEP_STATE_SKIPPED';
      s.completedAt = now();
    }
    await record();
    await control.setRolloutTraffic({ ...pair, percent: 100, final: true });
    snap.currentTrafficPercent = 100;
    const floor = Math.max(plan.finalTargetReplicas, input.target.min);
    const ceiling = Math.max(plan.finalTargetReplicas, input.source.max, targetMax, floor);
    await bounds('target', floor, ceiling, 'the rollout landed');
    await bounds('source', plan.finalSourceReplicas, plan.finalSourceReplicas, 'drained after the rollout');
    snap.state = 'ROLLOUT_STATE_COMPLETED';
    snap.completedAt = now();
    snap.pauseInfo = undefined;
    await record();
    await event(
      'rollout.completed',
      `Rollout ${input.rolloutId} ${how === 'promoted' ? 'promoted' : 'completed'}: all traffic on ${pair.targetDeploymentId}; ` +
        `source ${pair.sourceDeploymentId} at ${plan.finalSourceReplicas} replica(s).`,
    );
    return snap.state;
  }

  async function cancel(reason: string, revert: boolean): Promise<RolloutState> {
    if (live().state !== 'ROLLOUT_STEP_STATE_PENDING') {
      live().state = 'ROLLOUT_STEP_STATE_CANCELED';
      live().completedAt = now();
    }
    // Revert: the pair's traffic goes back to the source, and both get the replica bounds they had.
    const reverting = revert && patched(PATCHES.rolloutCancelRevert.id);
    if (reverting) {
      await control.setRolloutTraffic({ ...pair, percent: 0 });
      snap.currentTrafficPercent = 0;
      await bounds('source', input.source.min, input.source.max, 'restored: the rollout was reverted');
      await bounds('target', input.target.min, input.target.max, 'restored: the rollout was reverted');
    }
    const message = reverting
      ? `Canceled and reverted: ${reason}. All of the pair's traffic is back on the source.`
      : `Canceled: ${reason}. Traffic frozen at ${snap.currentTrafficPercent}% on the target.`;
    snap.condition = {
      atStep: snap.currentStep,
      category: 'ROLLOUT_FAILURE_CATEGORY_ABORTED_BY_OPERATOR',
      message,
      observedAt: now(),
    };
    snap.state = 'ROLLOUT_STATE_CANCELED';
    snap.completedAt = now();
    snap.pauseInfo = undefined;
    await record();
    await event('rollout.canceled', `Rollout ${input.rolloutId}: ${message}`);
    return snap.state;
  }

  await record();
  await event(
    'rollout.started',
    `Rollout ${input.rolloutId} started: ${plan.strategy}, ${plan.steps.map((s) => `${s.traffic}%`).join(' -> ')} to ${pair.targetDeploymentId}.`,
  );
  // A target stopped at zero replicas (max 0, e.g. the source of an earlier rollout) is lifted so it can serve.
  let targetMax = input.target.max;
  if (targetMax < 1) {
    targetMax = Math.max(1, plan.finalTargetReplicas);
    await bounds('target', Math.max(1, input.target.min), targetMax, 'woken for the rollout');
  }
  let stepApplied = false;
  for (;;) {
    const c = command as Command | null;
    if (c?.kind === 'cancel') return cancel(c.reason, c.revert);
    if (c?.kind === 'promote') return complete('promoted');
    if (c?.kind === 'resume') command = null;
    if (c?.kind === 'pause') {
      await park('ROLLOUT_STATE_PAUSED', c.reason ?? 'paused by an operator');
      continue;
    }
    const i = snap.currentStep!;
    if (i >= plan.steps.length) return complete('passed');
    const step = plan.steps[i];

    if (!stepApplied) {
      live().state = 'ROLLOUT_STEP_STATE_RUNNING';
      live().startedAt = live().startedAt ?? now();
      await record();
      if (step.replicas !== undefined)
        await bounds('target', step.replicas, Math.max(step.replicas, targetMax), `step ${i}`);
      const ready = await targetReady(step.replicas);
      if (ready.outcome === 'interrupted') continue;
      if (ready.outcome === 'timeout') {
        await systemPause(
          'ROLLOUT_FAILURE_CATEGORY_TARGET_NOT_READY',
          `The target is not ready: ${ready.message}.`,
          undefined,
        );
        continue;
      }
      await control.setRolloutTraffic({ ...pair, percent: step.traffic, step: i });
      snap.currentTrafficPercent = step.traffic;
      if (plan.strategy === 'ROLLOUT_STRATEGY_TYPE_ROLLING') {
        const left = Math.max(plan.finalSourceReplicas, Math.round(input.source.replicas * (1 - step.traffic / 100)));
        await bounds('source', left, left, `batch ${i} drained`);
      }
      stepApplied = true;
      await record();
    }

    // The soak: a durable timer that a command cuts short.
    if (await condition(() => command !== null, `${plan.stepIntervalSeconds} seconds`)) continue;
    const gate = await control.evaluateRolloutGate({
      ...pair,
      rules: plan.metrics,
      stepWindowSeconds: plan.stepIntervalSeconds,
      startedAtMs,
    });
    if (command !== null) continue; // an operator acted while the gate was measured; theirs comes first
    live().metrics = gate.metrics;
    if (!gate.pass) {
      await systemPause(gate.category!, gate.message, gate.metrics);
      continue;
    }
    live().state = 'ROLLOUT_STEP_STATE_PASSED';
    live().completedAt = now();
    await event(
      'rollout.step_passed',
      `Rollout ${input.rolloutId} step ${i} (${step.traffic}%) passed. ${gate.message}`,
    );
    snap.currentStep = i + 1 < plan.steps.length ? i + 1 : i;
    stepApplied = false;
    if (i + 1 >= plan.steps.length) return complete('passed');
    await record();
  }
}
