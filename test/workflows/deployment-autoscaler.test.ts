/**
 * The deployment autoscaler's decision (shared/deployments.ts), a pure
 * function of its observation window, without Temporal: up at once, down only
 * when the whole window agrees and the cool-down has passed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { autoscaleDecision, type ActiveAutoscaling, type DemandSample } from '../../shared/deployments';

const inflight: ActiveAutoscaling = {
  metric: 'CustomMetric',
  custom_metric_name: 'inflight',
  target: 10,
  time_interval_minutes: 2,
};
const bounds = { min: 1, max: 5, cooldownSeconds: 60 };
const MIN = 60_000;

describe('deployment autoscaler (pure)', () => {
  test('scales up at once to what the latest observation asks for, within max_replicas', () => {
    assert.equal(autoscaleDecision(inflight, [], { at: 0, demand: 25 }, { ...bounds, current: 1, lastScaleAt: 0 }), 3);
    assert.equal(autoscaleDecision(inflight, [], { at: 0, demand: 900 }, { ...bounds, current: 1, lastScaleAt: 0 }), 5);
    assert.equal(
      autoscaleDecision(inflight, [], { at: 0, demand: 30 }, { ...bounds, current: 3, lastScaleAt: 0 }),
      undefined,
      'already there',
    );
  });

  test('scales down only when the whole window agrees, and not during the cool-down', () => {
    const window: DemandSample[] = [];
    const at = (t: number, demand: number, lastScaleAt = 0) =>
      autoscaleDecision(inflight, window, { at: t, demand }, { ...bounds, current: 3, lastScaleAt });
    assert.equal(at(1 * MIN, 30), undefined);
    assert.equal(at(2 * MIN, 5), undefined, 'the 30 a minute ago is still in the 2-minute window');
    assert.equal(at(3 * MIN + 1, 5), 1, 'the window now agrees: down to what its peak needs');
    assert.equal(at(3 * MIN + 2, 5, 3 * MIN), undefined, 'cool-down after the last action');
    assert.deepEqual(
      window.map((o) => o.demand),
      [5, 5, 5],
      'the 30 observed before the window is dropped',
    );
  });

  test('never below min_replicas (zero allowed when it is zero)', () => {
    assert.equal(
      autoscaleDecision(inflight, [], { at: 10 * MIN, demand: 0 }, { ...bounds, current: 3, lastScaleAt: 0 }),
      1,
    );
    assert.equal(
      autoscaleDecision(inflight, [], { at: 10 * MIN, demand: 0 }, { ...bounds, min: 0, current: 1, lastScaleAt: 0 }),
      0,
    );
  });
});
