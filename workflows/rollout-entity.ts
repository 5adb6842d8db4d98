/**
 * The behaviour of an endpoint rollout (`endpointRollout`, in rollouts.ts): the operator's pending
 * command, and its steps: apply a step (replicas, readiness, traffic), soak and gate it, park while
 * paused, complete or cancel. What it does to the two deployments goes through RolloutPair
 * (rollout-pair.ts), what it shows through RolloutView (rollout-view.ts). The workflow function
 * wires the Updates to the handlers here and runs the loop. Workflow code: a change to the
 * commands it issues goes behind a patch (patches.ts).
 */
import { condition, proxyActivities, patched } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { refuse } from './entity-kit';
import type { RolloutActivities } from '../activities/rollouts';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import type { RolloutSnapshot, RolloutState, RolloutWorkflowInput } from '../shared/rollouts';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';
import { RolloutPair } from './rollout-pair';
import { RolloutView, now } from './rollout-view';
import type { CancelDisposition } from './rollouts';

const control = proxyActivities<RolloutActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

export const PAUSED_STATES: RolloutState[] = [
  'ROLLOUT_STATE_PAUSING',
  'ROLLOUT_STATE_PAUSED',
  'ROLLOUT_STATE_SYSTEM_PAUSED',
];

/** An operator's command, taken by the main loop at its next turn. */
type Command =
  | { kind: 'pause'; reason?: string }
  | { kind: 'resume' }
  | { kind: 'promote' }
  | { kind: 'cancel'; reason: string; revert: boolean };

export class RolloutEntity {
  /** The operator's latest command, until the main loop takes it. */
  command: Command | null = null;
  private readonly plan: RolloutWorkflowInput['plan'];
  /** The source and target deployments: their bounds, readiness and events. */
  private readonly pair: RolloutPair;
  /** What the API and operators see of the rollout, and its recording. */
  private readonly view: RolloutView;
  private readonly snap: RolloutSnapshot;
  private readonly startedAtMs = Date.now();
  /** The target's replica ceiling, lifted from 0 at the start if the target was stopped. */
  private targetMax: number;
  /** The current step's replicas, readiness and traffic are in place (it soaks and gates next). */
  private stepApplied = false;

  constructor(private readonly input: RolloutWorkflowInput) {
    this.plan = input.plan;
    this.pair = new RolloutPair(input, control);
    this.view = new RolloutView(input, control.recordRollout);
    this.snap = this.view.snap;
    this.targetMax = input.target.max;
  }

  // ---- messages (the workflow function routes each Update to one of these) ----

  /** The validator of an Update allowed only in `states`. */
  allows(what: string, states: RolloutState[]) {
    return (..._args: unknown[]) => {
      if (!states.includes(this.snap.state))
        throw refuse(UPDATE_REJECTIONS.conflict, `Cannot ${what} a rollout that is ${this.snap.state}.`, {
          code: 'rollout_state',
        });
    };
  }

  async onPause(reason: string | undefined): Promise<void> {
    this.command = { kind: 'pause', reason };
    this.snap.state = 'ROLLOUT_STATE_PAUSING';
    this.snap.pauseInfo = { pausedAt: now(), ...(reason ? { reason } : {}) };
    await this.view.record();
  }

  async onResume(): Promise<void> {
    const snap = this.snap;
    this.command = { kind: 'resume' };
    snap.state = 'ROLLOUT_STATE_RUNNING';
    snap.pauseInfo = undefined;
    snap.condition = undefined;
    if (this.view.currentStep().state !== 'ROLLOUT_STEP_STATE_PENDING') {
      this.view.currentStep().state = 'ROLLOUT_STEP_STATE_RUNNING';
      this.view.currentStep().failureReason = undefined;
    }
    await this.view.record();
    await this.pair.event('rollout.resumed', `Rollout ${this.input.rolloutId} resumed at step ${snap.currentStep}.`);
  }

  onPromote(): void {
    this.command = { kind: 'promote' };
  }

  async onCancel(reason: string, disposition: CancelDisposition | undefined): Promise<void> {
    this.command = { kind: 'cancel', reason, revert: disposition === 'CANCEL_DISPOSITION_REVERT' };
    this.snap.state = 'ROLLOUT_STATE_CANCELLING';
    await this.view.record();
  }

  /** The main loop took a resume: the rollout goes on. */
  resumed(): void {
    this.command = null;
  }

  // ---- steps ----

  /** The rollout begins: projected, announced, and a target stopped at zero replicas lifted so it can serve. */
  async start(): Promise<void> {
    const plan = this.plan;
    await this.view.record();
    await this.pair.event(
      'rollout.started',
      `Rollout ${this.input.rolloutId} started: ${plan.strategy}, ${plan.steps.map((s) => `${s.traffic}%`).join(' -> ')} to ${this.pair.ids.targetDeploymentId}.`,
    );
    // (max 0: e.g. the source of an earlier rollout)
    if (this.targetMax < 1) {
      this.targetMax = Math.max(1, plan.finalTargetReplicas);
      await this.pair.bounds('target', Math.max(1, this.input.target.min), this.targetMax, 'woken for the rollout');
    }
  }

  /** Every step has passed. */
  stepsDone(): boolean {
    return this.snap.currentStep! >= this.plan.steps.length;
  }

  /**
   * Puts the current step in place once: the target's replicas, its readiness, the traffic split
   * (and, rolling, the source drained by the step's share). False when a command interrupted the
   * wait for the target, or the rollout paused itself because the target did not get ready.
   */
  async applyStep(): Promise<boolean> {
    if (this.stepApplied) return true;
    const { snap, plan, input } = this;
    const i = snap.currentStep!;
    const step = plan.steps[i];
    this.view.currentStep().state = 'ROLLOUT_STEP_STATE_RUNNING';
    this.view.currentStep().startedAt = this.view.currentStep().startedAt ?? now();
    await this.view.record();
    if (step.replicas !== undefined)
      await this.pair.bounds('target', step.replicas, Math.max(step.replicas, this.targetMax), `step ${i}`);
    const ready = await this.pair.targetReady(step.replicas, () => this.command !== null);
    if (ready.outcome === 'interrupted') return false;
    if (ready.outcome === 'timeout') {
      await this.systemPause(
        'ROLLOUT_FAILURE_CATEGORY_TARGET_NOT_READY',
        `The target is not ready: ${ready.message}.`,
        undefined,
      );
      return false;
    }
    await control.setRolloutTraffic({ ...this.pair.ids, percent: step.traffic, step: i });
    snap.currentTrafficPercent = step.traffic;
    if (plan.strategy === 'ROLLOUT_STRATEGY_TYPE_ROLLING') {
      const left = Math.max(plan.finalSourceReplicas, Math.round(input.source.replicas * (1 - step.traffic / 100)));
      await this.pair.bounds('source', left, left, `batch ${i} drained`);
    }
    this.stepApplied = true;
    await this.view.record();
    return true;
  }

  /**
   * The soak of the applied step (a durable timer that a command cuts short), then its gate on what
   * the gateway measured: 'again' when a command came first or the gate failed (the rollout paused
   * itself), 'next' when the step passed, 'last' when the last step passed.
   */
  async soakAndGate(): Promise<'again' | 'next' | 'last'> {
    const { snap, plan, input } = this;
    const i = snap.currentStep!;
    const step = plan.steps[i];
    if (await condition(() => this.command !== null, `${plan.stepIntervalSeconds} seconds`)) return 'again';
    const gate = await control.evaluateRolloutGate({
      ...this.pair.ids,
      rules: plan.metrics,
      stepWindowSeconds: plan.stepIntervalSeconds,
      startedAtMs: this.startedAtMs,
    });
    if (this.command !== null) return 'again'; // an operator acted while the gate was measured; theirs comes first
    this.view.currentStep().metrics = gate.metrics;
    if (!gate.pass) {
      await this.systemPause(gate.category!, gate.message, gate.metrics);
      return 'again';
    }
    this.view.currentStep().state = 'ROLLOUT_STEP_STATE_PASSED';
    this.view.currentStep().completedAt = now();
    await this.pair.event(
      'rollout.step_passed',
      `Rollout ${input.rolloutId} step ${i} (${step.traffic}%) passed. ${gate.message}`,
    );
    snap.currentStep = i + 1 < plan.steps.length ? i + 1 : i;
    this.stepApplied = false;
    if (i + 1 >= plan.steps.length) return 'last';
    await this.view.record();
    return 'next';
  }

  /** Parks the rollout until a command other than pause arrives (resume, promote or cancel). */
  async park(state: 'ROLLOUT_STATE_PAUSED' | 'ROLLOUT_STATE_SYSTEM_PAUSED', reason: string) {
    const snap = this.snap;
    snap.state = state;
    snap.pauseInfo = snap.pauseInfo ?? { pausedAt: now(), reason };
    if (this.view.currentStep().state === 'ROLLOUT_STEP_STATE_RUNNING')
      this.view.currentStep().state = 'ROLLOUT_STEP_STATE_PAUSED';
    await this.view.record();
    await this.pair.event(
      state === 'ROLLOUT_STATE_PAUSED' ? 'rollout.paused' : 'rollout.system_paused',
      `Rollout ${this.input.rolloutId} ${state === 'ROLLOUT_STATE_PAUSED' ? 'paused' : 'paused itself'} at step ${snap.currentStep}: ${reason}`,
      state === 'ROLLOUT_STATE_PAUSED' ? 'LEVEL_INFO' : 'LEVEL_WARN',
    );
    await condition(() => this.command !== null && this.command.kind !== 'pause');
  }

  private async systemPause(
    category: NonNullable<RolloutSnapshot['condition']>['category'],
    message: string,
    metrics = this.view.currentStep().metrics,
  ) {
    const snap = this.snap;
    this.view.currentStep().state = 'ROLLOUT_STEP_STATE_FAILED';
    this.view.currentStep().failureReason = message;
    snap.condition = {
      atStep: snap.currentStep,
      category,
      message,
      observedAt: now(),
      ...(metrics ? { metrics } : {}),
    };
    snap.pauseInfo = { pausedAt: now(), reason: message };
    await this.park('ROLLOUT_STATE_SYSTEM_PAUSED', message);
  }

  /** All traffic to the target, its final bounds, the source drained: the rollout is COMPLETED. */
  async complete(how: 'promoted' | 'passed'): Promise<RolloutState> {
    this.snap.state = 'ROLLOUT_STATE_STABILIZING';
    for (const s of this.snap.steps) {
      if (s.state === 'ROLLOUT_STEP_STATE_PASSED') continue;
      s.state = 'ROLLOUT_STEP_STATE_SKIPPED';
      s.completedAt = now();
    }
    await this.view.record();
    await control.setRolloutTraffic({ ...this.pair.ids, percent: 100, final: true });
    this.snap.currentTrafficPercent = 100;
    const floor = Math.max(this.plan.finalTargetReplicas, this.input.target.min);
    const ceiling = Math.max(this.plan.finalTargetReplicas, this.input.source.max, this.targetMax, floor);
    await this.pair.bounds('target', floor, ceiling, 'the rollout landed');
    await this.pair.bounds(
      'source',
      this.plan.finalSourceReplicas,
      this.plan.finalSourceReplicas,
      'drained after the rollout',
    );
    this.snap.state = 'ROLLOUT_STATE_COMPLETED';
    this.snap.completedAt = now();
    this.snap.pauseInfo = undefined;
    await this.view.record();
    await this.pair.event(
      'rollout.completed',
      `Rollout ${this.input.rolloutId} ${how === 'promoted' ? 'promoted' : 'completed'}: all traffic on ${this.pair.ids.targetDeploymentId}; ` +
        `source ${this.pair.ids.sourceDeploymentId} at ${this.plan.finalSourceReplicas} replica(s).`,
    );
    return this.snap.state;
  }

  /** The rollout ends CANCELED: the split frozen, or (revert) all traffic back on the source with both bounds restored. */
  async cancel(reason: string, revert: boolean): Promise<RolloutState> {
    if (this.view.currentStep().state !== 'ROLLOUT_STEP_STATE_PENDING') {
      this.view.currentStep().state = 'ROLLOUT_STEP_STATE_CANCELED';
      this.view.currentStep().completedAt = now();
    }
    // Revert: the pair's traffic goes back to the source, and both get the replica bounds they had.
    const reverting = revert && patched(PATCHES.rolloutCancelRevert.id);
    if (reverting) {
      await control.setRolloutTraffic({ ...this.pair.ids, percent: 0 });
      this.snap.currentTrafficPercent = 0;
      await this.pair.bounds(
        'source',
        this.input.source.min,
        this.input.source.max,
        'restored: the rollout was reverted',
      );
      await this.pair.bounds(
        'target',
        this.input.target.min,
        this.input.target.max,
        'restored: the rollout was reverted',
      );
    }
    const message = reverting
      ? `Canceled and reverted: ${reason}. All of the pair's traffic is back on the source.`
      : `Canceled: ${reason}. Traffic frozen at ${this.snap.currentTrafficPercent}% on the target.`;
    this.snap.condition = {
      atStep: this.snap.currentStep,
      category: 'ROLLOUT_FAILURE_CATEGORY_ABORTED_BY_OPERATOR',
      message,
      observedAt: now(),
    };
    this.snap.state = 'ROLLOUT_STATE_CANCELED';
    this.snap.completedAt = now();
    this.snap.pauseInfo = undefined;
    await this.view.record();
    await this.pair.event('rollout.canceled', `Rollout ${this.input.rolloutId}: ${message}`);
    return this.snap.state;
  }
}
