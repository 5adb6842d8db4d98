/**
 * The rules a rollout gate applies, on values whose right answer is known
 * from the data itself: percentiles of latencies 1..100 ms, thresholds that
 * gate nothing, regression budgets, the steps each strategy walks, and when a
 * target counts as able to take traffic.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { measureMetric } from '../../activities/rollout-metrics';
import { histogramPercentile } from '../../db/router-stats';
import { checkMetricRule, judgeMetric, planSteps, type MetricRule } from '../../shared/rollouts';
import { canTakeTraffic } from '../../shared/endpoint-state';
import type { EndpointDeploymentRow } from '../../db/endpoints';
import { ROUTER_LATENCY_BUCKETS_MS, type RouterSecond } from '../../db/router-stats';

/** One second of gateway records holding the given latencies (and `errors` failures). */
function second(latencies: number[], errors = 0, at = 0): RouterSecond {
  const buckets = new Array(ROUTER_LATENCY_BUCKETS_MS.length + 1).fill(0);
  for (const ms of latencies) {
    const i = ROUTER_LATENCY_BUCKETS_MS.findIndex((b) => ms <= b);
    buckets[i < 0 ? ROUTER_LATENCY_BUCKETS_MS.length : i]++;
  }
  return {
    second: at,
    requests: latencies.length,
    errors,
    latencySum: latencies.reduce((a, b) => a + b, 0),
    latencyMin: Math.min(...latencies),
    latencyMax: Math.max(...latencies),
    buckets,
  };
}

const rule = (r: Partial<MetricRule> & Pick<MetricRule, 'name'>): MetricRule => ({
  stat: 'METRIC_STAT_TYPE_AVG',
  windowSeconds: 10,
  ...r,
});

describe('rollout gate rules', () => {
  test('latency percentiles and averages of 1..100 ms', () => {
    const all = Array.from({ length: 100 }, (_, i) => i + 1);
    const seconds = [second(all.slice(0, 50), 0, 1), second(all.slice(50), 0, 2)];
    assert.equal(histogramPercentile(seconds, 95), 95);
    assert.equal(histogramPercentile(seconds, 50), 50);
    assert.equal(measureMetric(seconds, rule({ name: 'router_latency' }), 10), 50.5);
    assert.equal(histogramPercentile([], 95), null);
  });

  test('error rates over the window and per second; in-flight by time spent', () => {
    const seconds = [second([10, 10, 10, 10], 1, 1), second([10, 10, 10, 10], 3, 2)];
    assert.equal(measureMetric(seconds, rule({ name: 'router_error_rate' }), 10), 0.5);
    assert.equal(measureMetric(seconds, rule({ name: 'router_error_rate', stat: 'METRIC_STAT_TYPE_MAX' }), 10), 0.75);
    assert.equal(measureMetric(seconds, rule({ name: 'router_error_rate', stat: 'METRIC_STAT_TYPE_MIN' }), 10), 0.25);
    assert.equal(measureMetric([], rule({ name: 'router_error_rate' }), 10), null);
    // 2 seconds, each with 2000 ms spent in requests: 2 in flight in those seconds, 0.4 over a 10 s window.
    const busy = [second([1000, 1000], 0, 1), second([500, 1500], 0, 2)];
    assert.equal(measureMetric(busy, rule({ name: 'inflight_requests' }), 10), 0.4);
    assert.equal(measureMetric(busy, rule({ name: 'inflight_requests', stat: 'METRIC_STAT_TYPE_MAX' }), 10), 2);
  });

  test('thresholds that gate nothing are refused', () => {
    const errorRate = (operator: string, value: number) =>
      checkMetricRule({
        name: 'router_error_rate',
        stat: 'METRIC_STAT_TYPE_AVG',
        thresholdCheck: { operator: operator as 'THRESHOLD_OPERATOR_LT', value },
      });
    assert.ok(errorRate('THRESHOLD_OPERATOR_LT', 0), 'no rate is below 0');
    assert.ok(errorRate('THRESHOLD_OPERATOR_GTE', 0), 'every rate is at least 0');
    assert.ok(errorRate('THRESHOLD_OPERATOR_LTE', 1), 'every rate is at most 1');
    assert.ok(errorRate('THRESHOLD_OPERATOR_GT', 1), 'no rate is above 1');
    assert.equal(errorRate('THRESHOLD_OPERATOR_LT', 0.1), null);
    const latency = checkMetricRule({
      name: 'router_latency',
      stat: 'METRIC_STAT_TYPE_AVG',
      thresholdCheck: { operator: 'THRESHOLD_OPERATOR_GT', value: -5 },
    });
    assert.ok(latency, 'every latency is above -5 ms');
    assert.ok(checkMetricRule({ name: 'router_error_rate', stat: 'METRIC_STAT_TYPE_AVG' }), 'a rule needs a check');
  });

  test('a regression budget is relative to the source; exactly at budget passes', () => {
    const r = rule({
      name: 'router_latency',
      regressionCheck: { direction: 'REGRESSION_DIRECTION_HIGHER_IS_WORSE', maxRegressionPercent: 10 },
    });
    assert.equal(judgeMetric(r, 110, 100).verdict, 'METRIC_VERDICT_PASS');
    assert.equal(judgeMetric(r, 115, 100).verdict, 'METRIC_VERDICT_BREACHED');
    assert.equal(judgeMetric(r, 80, 100).verdict, 'METRIC_VERDICT_PASS');
    assert.equal(judgeMetric(r, 80, null).verdict, 'METRIC_VERDICT_UNAVAILABLE');
  });

  test('steps: the default canary ladder, one blue-green cut-over, one rolling batch per replica', () => {
    const traffic = (steps: Array<{ traffic: number }>) => steps.map((s) => s.traffic);
    assert.deepEqual(traffic(planSteps('ROLLOUT_STRATEGY_TYPE_CANARY', undefined, 1)), [5, 25, 50, 100]);
    assert.deepEqual(planSteps('ROLLOUT_STRATEGY_TYPE_BLUE_GREEN', undefined, 2), [{ traffic: 100, replicas: 2 }]);
    assert.deepEqual(planSteps('ROLLOUT_STRATEGY_TYPE_ROLLING', undefined, 3), [
      { traffic: 33, replicas: 1 },
      { traffic: 67, replicas: 2 },
      { traffic: 100, replicas: 3 },
    ]);
  });
});

describe('a rollout target that can take traffic', () => {
  /** An endpoint deployment whose container deployment has this status and these counts. */
  const target = (container_status: string, ready_replicas: number, desired_replicas: number, max = 2) =>
    ({
      container_deployment_id: 'dep_c',
      container_status,
      ready_replicas,
      desired_replicas,
      failure: null,
      deleting: false,
      autoscaling: { minReplicas: 1, maxReplicas: max },
    }) as unknown as EndpointDeploymentRow;

  test('ready, or growing with the replicas a step needs already serving', () => {
    assert.equal(canTakeTraffic(target('Ready', 2, 2)), true);
    assert.equal(canTakeTraffic(target('Ready', 1, 1), 2), false, 'a step that needs 2 waits for 2');
    // A rolling step needs 1 replica; the target is starting a second (its minimum was 2 before
    // the rollout, or the autoscaler asked): it serves, and the step goes on.
    assert.equal(canTakeTraffic(target('Scaling', 1, 2)), true);
    assert.equal(canTakeTraffic(target('Scaling', 1, 2), 1), true);
    assert.equal(canTakeTraffic(target('Scaling', 1, 3), 2), false);
    assert.equal(canTakeTraffic(target('Scaling', 0, 2)), false, 'nothing serves yet');
    assert.equal(canTakeTraffic(target('Failed', 1, 2)), false);
    assert.equal(canTakeTraffic(target('ScaledToZero', 0, 0)), true, 'scaled to zero: a request wakes it');
    assert.equal(canTakeTraffic(target('ScaledToZero', 0, 0, 0)), false, 'drained to 0 by a rollout: stopped');
  });
});
