/**
 * Rollouts (SDK beta.endpoints.rollouts): the vocabulary shared by the API,
 * the rollout workflow and its activities, and the pure rules they agree on:
 * which steps a strategy walks, which metric gates are well formed, and how
 * a measured value is judged. Nothing here does I/O, so the workflow may use
 * all of it.
 */

export const rolloutWorkflowId = (rolloutId: string) => `rollout/${rolloutId}`;

export type RolloutStrategy =
  'ROLLOUT_STRATEGY_TYPE_ROLLING' | 'ROLLOUT_STRATEGY_TYPE_CANARY' | 'ROLLOUT_STRATEGY_TYPE_BLUE_GREEN';

export type RolloutState =
  | 'ROLLOUT_STATE_PENDING'
  | 'ROLLOUT_STATE_RUNNING'
  | 'ROLLOUT_STATE_PAUSING'
  | 'ROLLOUT_STATE_PAUSED'
  | 'ROLLOUT_STATE_SYSTEM_PAUSED'
  | 'ROLLOUT_STATE_STABILIZING'
  | 'ROLLOUT_STATE_CANCELLING'
  | 'ROLLOUT_STATE_CANCELED'
  | 'ROLLOUT_STATE_COMPLETED'
  | 'ROLLOUT_STATE_ABORTING'
  | 'ROLLOUT_STATE_ABORTED';

export const TERMINAL_ROLLOUT_STATES: readonly RolloutState[] = [
  'ROLLOUT_STATE_COMPLETED',
  'ROLLOUT_STATE_ABORTED',
  'ROLLOUT_STATE_CANCELED',
];

export type StepState =
  | 'ROLLOUT_STEP_STATE_PENDING'
  | 'ROLLOUT_STEP_STATE_RUNNING'
  | 'ROLLOUT_STEP_STATE_PASSED'
  | 'ROLLOUT_STEP_STATE_FAILED'
  | 'ROLLOUT_STEP_STATE_PAUSED'
  | 'ROLLOUT_STEP_STATE_CANCELED'
  | 'ROLLOUT_STEP_STATE_SKIPPED';

export type FailureCategory =
  | 'ROLLOUT_FAILURE_CATEGORY_METRIC_REGRESSION'
  | 'ROLLOUT_FAILURE_CATEGORY_METRICS_UNAVAILABLE'
  | 'ROLLOUT_FAILURE_CATEGORY_TARGET_NOT_READY'
  | 'ROLLOUT_FAILURE_CATEGORY_HEALTH_REGRESSION'
  | 'ROLLOUT_FAILURE_CATEGORY_ABORTED_BY_OPERATOR'
  | 'ROLLOUT_FAILURE_CATEGORY_INTERNAL';

export type MetricName = 'inflight_requests' | 'router_error_rate' | 'router_latency';
export type MetricStat =
  'METRIC_STAT_TYPE_AVG' | 'METRIC_STAT_TYPE_MIN' | 'METRIC_STAT_TYPE_MAX' | 'METRIC_STAT_TYPE_PERCENTILE';
export type ThresholdOperator =
  'THRESHOLD_OPERATOR_GT' | 'THRESHOLD_OPERATOR_GTE' | 'THRESHOLD_OPERATOR_LT' | 'THRESHOLD_OPERATOR_LTE';
export type RegressionDirection = 'REGRESSION_DIRECTION_HIGHER_IS_WORSE' | 'REGRESSION_DIRECTION_LOWER_IS_WORSE';

/** A metric gate with its defaults filled in (stat, window). */
export interface MetricRule {
  name: MetricName;
  stat: MetricStat;
  percentile?: number;
  thresholdCheck?: { operator: ThresholdOperator; value: number };
  regressionCheck?: { direction: RegressionDirection; maxRegressionPercent: number };
  windowSeconds: number;
}

/** The SDK's Step.Metric / Condition.Metric: a rule, what was measured, and the verdict. */
export interface MetricResult {
  name: MetricName;
  stat: MetricStat;
  percentile?: number;
  check: 'METRIC_CHECK_TYPE_THRESHOLD' | 'METRIC_CHECK_TYPE_REGRESSION';
  operator?: ThresholdOperator;
  threshold?: number;
  direction?: RegressionDirection;
  maxRegressionPercent?: number;
  sourceValue?: number;
  targetValue?: number;
  verdict: 'METRIC_VERDICT_PASS' | 'METRIC_VERDICT_BREACHED' | 'METRIC_VERDICT_UNAVAILABLE';
}

export interface PlannedStep {
  traffic: number;
  /** The target's replica floor at this step (rolling batches, or a canary step that names it). */
  replicas?: number;
}

/** What the workflow runs: the strategy's steps and every default decided at create. */
export interface RolloutPlan {
  strategy: RolloutStrategy;
  steps: PlannedStep[];
  stepIntervalSeconds: number;
  metrics: MetricRule[];
  finalSourceReplicas: number;
  finalTargetReplicas: number;
}

export interface RolloutCondition {
  atStep?: number;
  category?: FailureCategory;
  message: string;
  metrics?: MetricResult[];
  observedAt: string;
}

export interface StepRecord {
  stepIndex: number;
  targetTrafficPercent: number;
  state: StepState;
  startedAt?: string;
  completedAt?: string;
  failureReason?: string;
  metrics?: MetricResult[];
}

/** Everything about a rollout that changes while it runs (the row's projection). */
export interface RolloutSnapshot {
  state: RolloutState;
  currentStep?: number;
  currentTrafficPercent?: number;
  steps: StepRecord[];
  condition?: RolloutCondition;
  pauseInfo?: { pausedAt: string; reason?: string };
  startedAt?: string;
  completedAt?: string;
}

export const DEFAULT_CANARY_LADDER = [5, 25, 50, 100];
/** The SDK's default soak between canary steps (3m). */
export const DEFAULT_STEP_INTERVAL_SECONDS = 180;
/** How long a rollout waits for its target to be ready before it pauses itself (TARGET_NOT_READY). */
export const TARGET_READY_TIMEOUT_SECONDS = 600;
/**
 * The gate every rollout applies beyond its own metric rules: a target whose
 * requests fail at the gateway more often than this (with at least
 * HEALTH_MIN_REQUESTS seen in the step) is a HEALTH_REGRESSION.
 */
export const HEALTH_MAX_ERROR_RATE = 0.5;
export const HEALTH_MIN_REQUESTS = 5;

/** A protobuf-JSON duration (`300s`, `1.5s`) or `3m` / `1h`, in seconds; null when unreadable. */
export function durationSeconds(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)$/.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
}

/**
 * The steps a strategy walks. Canary: the given ladder or 5/25/50/100.
 * Blue-green: one cut-over to 100% once the target has its final replicas.
 * Rolling: one batch per replica, each adding a target replica and taking
 * the matching share of traffic (replica-proportional, capacity preserving).
 */
export function planSteps(
  strategy: RolloutStrategy,
  canarySteps: PlannedStep[] | undefined,
  finalTargetReplicas: number,
): PlannedStep[] {
  if (strategy === 'ROLLOUT_STRATEGY_TYPE_CANARY')
    return canarySteps?.length ? canarySteps : DEFAULT_CANARY_LADDER.map((traffic) => ({ traffic }));
  if (strategy === 'ROLLOUT_STRATEGY_TYPE_BLUE_GREEN') return [{ traffic: 100, replicas: finalTargetReplicas }];
  const n = Math.max(1, finalTargetReplicas);
  return Array.from({ length: n }, (_, i) => ({ traffic: Math.round(((i + 1) * 100) / n), replicas: i + 1 }));
}

/** What is wrong with explicit canary steps ([field, message]), or null. */
export function checkCanarySteps(steps: PlannedStep[]): [string, string] | null {
  for (const [i, s] of steps.entries()) {
    if (!(s.traffic > 0 && s.traffic <= 100))
      return [`canary.steps[${i}].traffic`, 'each step sends more than 0 and at most 100 percent to the target'];
    if (i > 0 && s.traffic <= steps[i - 1].traffic) return [`canary.steps[${i}].traffic`, 'steps must increase'];
  }
  if (steps.length && steps[steps.length - 1].traffic !== 100)
    return [`canary.steps[${steps.length - 1}].traffic`, 'the last step must send 100 percent to the target'];
  return null;
}

/** The values a metric can take: the error rate is a ratio, latency and in-flight counts are non-negative. */
const RANGE: Record<MetricName, [number, number]> = {
  router_error_rate: [0, 1],
  router_latency: [0, Infinity],
  inflight_requests: [0, Infinity],
};

export function passesThreshold(value: number, operator: ThresholdOperator, bound: number): boolean {
  switch (operator) {
    case 'THRESHOLD_OPERATOR_GT':
      return value > bound;
    case 'THRESHOLD_OPERATOR_GTE':
      return value >= bound;
    case 'THRESHOLD_OPERATOR_LT':
      return value < bound;
    case 'THRESHOLD_OPERATOR_LTE':
      return value <= bound;
  }
}

/**
 * What is wrong with a metric rule ([field suffix, message]), or null. A
 * threshold that no value in the metric's range could pass, or that every
 * value passes, gates nothing and is refused, as the SDK describes.
 */
export function checkMetricRule(rule: Omit<MetricRule, 'windowSeconds'>): [string, string] | null {
  if (!!rule.thresholdCheck === !!rule.regressionCheck)
    return ['', 'give exactly one of thresholdCheck and regressionCheck'];
  if (rule.name === 'router_latency' && !['METRIC_STAT_TYPE_AVG', 'METRIC_STAT_TYPE_PERCENTILE'].includes(rule.stat))
    return ['stat', 'router_latency needs stat METRIC_STAT_TYPE_AVG or METRIC_STAT_TYPE_PERCENTILE'];
  if (rule.stat === 'METRIC_STAT_TYPE_PERCENTILE') {
    if (rule.name !== 'router_latency') return ['stat', 'only router_latency has percentiles'];
    if (rule.percentile === undefined || !(rule.percentile > 0 && rule.percentile < 100))
      return ['percentile', 'a percentile between 0 and 100 (exclusive) is required with METRIC_STAT_TYPE_PERCENTILE'];
  } else if (rule.percentile !== undefined)
    return ['percentile', 'percentile is set only with METRIC_STAT_TYPE_PERCENTILE'];
  if (rule.thresholdCheck) {
    const { operator, value } = rule.thresholdCheck;
    if (!Number.isFinite(value)) return ['thresholdCheck.value', 'the threshold must be a finite number'];
    const [lo, hi] = RANGE[rule.name];
    // Probe the range's ends, the bound itself and points just beside it.
    const probes = [lo, hi, value, value - 1e-9, value + 1e-9].filter((v) => v >= lo && v <= hi && Number.isFinite(v));
    if (hi === Infinity) probes.push(Math.max(lo, value) + 1);
    const results = probes.map((v) => passesThreshold(v, operator, value));
    if (!results.includes(true)) return ['thresholdCheck', `no ${rule.name} value could pass this threshold`];
    if (!results.includes(false)) return ['thresholdCheck', `every ${rule.name} value passes this threshold`];
  }
  if (rule.regressionCheck) {
    const p = rule.regressionCheck.maxRegressionPercent;
    if (!Number.isFinite(p) || p < 0)
      return ['regressionCheck.maxRegressionPercent', 'a finite percentage of at least 0 is required'];
  }
  return null;
}

/**
 * Judges one rule on measured values. A threshold looks at the target only;
 * a regression compares the target with the source: with HIGHER_IS_WORSE the
 * target fails when it exceeds the source by more than the budget (relative
 * to the source; a source of 0 allows no increase). No measurement:
 * METRIC_VERDICT_UNAVAILABLE.
 */
export function judgeMetric(rule: MetricRule, target: number | null, source: number | null): MetricResult {
  const base = {
    name: rule.name,
    stat: rule.stat,
    ...(rule.percentile !== undefined ? { percentile: rule.percentile } : {}),
  };
  if (rule.thresholdCheck) {
    const row = {
      ...base,
      check: 'METRIC_CHECK_TYPE_THRESHOLD' as const,
      operator: rule.thresholdCheck.operator,
      threshold: rule.thresholdCheck.value,
    };
    if (target === null) return { ...row, verdict: 'METRIC_VERDICT_UNAVAILABLE' };
    const pass = passesThreshold(target, rule.thresholdCheck.operator, rule.thresholdCheck.value);
    return { ...row, targetValue: target, verdict: pass ? 'METRIC_VERDICT_PASS' : 'METRIC_VERDICT_BREACHED' };
  }
  const check = rule.regressionCheck!;
  const row = {
    ...base,
    check: 'METRIC_CHECK_TYPE_REGRESSION' as const,
    direction: check.direction,
    maxRegressionPercent: check.maxRegressionPercent,
  };
  if (target === null || source === null) return { ...row, verdict: 'METRIC_VERDICT_UNAVAILABLE' };
  const worseBy = check.direction === 'REGRESSION_DIRECTION_HIGHER_IS_WORSE' ? target - source : source - target;
  const allowed = (Math.abs(source) * check.maxRegressionPercent) / 100;
  return {
    ...row,
    sourceValue: source,
    targetValue: target,
    verdict: worseBy <= allowed ? 'METRIC_VERDICT_PASS' : 'METRIC_VERDICT_BREACHED',
  };
}

/** The SDK's RolloutStrategy of a create body: exactly one of canary, rolling, blueGreen (canary when none). */
export function strategyOf(body: { canary?: unknown; rolling?: unknown; blueGreen?: unknown }): RolloutStrategy | null {
  const given = [body.canary, body.rolling, body.blueGreen].filter((x) => x !== undefined).length;
  if (given > 1) return null;
  if (body.rolling !== undefined) return 'ROLLOUT_STRATEGY_TYPE_ROLLING';
  if (body.blueGreen !== undefined) return 'ROLLOUT_STRATEGY_TYPE_BLUE_GREEN';
  return 'ROLLOUT_STRATEGY_TYPE_CANARY';
}

/** Names of the rollout workflow's messages: Updates, the API's pause, resume, promote and cancel (definitions in workflows/rollouts.ts). */
export const ROLLOUT_MESSAGES = {
  pause: 'pauseRollout',
  resume: 'resumeRollout',
  promote: 'promoteRollout',
  cancel: 'cancelRollout',
} as const;

export interface RolloutWorkflowInput {
  rolloutId: string;
  endpointId: string;
  sourceDeploymentId: string;
  targetDeploymentId: string;
  /** The container deployments serving the pair (their workflows get new replica bounds). */
  sourceContainerId: string | null;
  targetContainerId: string | null;
  /** The pair's replica bounds when the rollout started. */
  source: { min: number; max: number; replicas: number };
  target: { min: number; max: number };
  plan: RolloutPlan;
  targetReadyTimeoutSeconds: number;
}
