/**
 * Activities of the rollout workflow (control queue): read the target's
 * health, move the endpoint's traffic between the pair, note replica bounds
 * on the endpoint deployments, measure the gates from what the inference
 * gateway saw, and project the rollout's progress into PostgreSQL. Each is
 * also an endpoint event where a person would want to see it.
 */
import {
  HEALTH_MAX_ERROR_RATE,
  HEALTH_MIN_REQUESTS,
  judgeMetric,
  type FailureCategory,
  type MetricResult,
  type MetricRule,
  type RolloutSnapshot,
} from '../shared/rollouts';
import { addEndpointEvent, getEndpointDeployment, newEtag, updateEndpoint, type EndpointEvent } from '../db/endpoints';
import { withTransaction, type Db } from '../db/pool';
import { recordRolloutSnapshot } from '../db/rollouts';
import { routerSeconds, routerTotals } from '../db/router-stats';
import { canTakeTraffic, deploymentState } from '../shared/endpoint-state';
import { measureMetric } from './rollout-metrics';

export interface RolloutPair {
  rolloutId: string;
  endpointId: string;
  sourceDeploymentId: string;
  targetDeploymentId: string;
}

export interface GateResult {
  pass: boolean;
  category?: FailureCategory;
  message: string;
  metrics: MetricResult[];
}

export function createRolloutActivities({ db }: { db: Db }) {
  const event = (pair: RolloutPair, e: Omit<EndpointEvent, 'endpointId' | 'sourceKind'>) =>
    addEndpointEvent(db, {
      endpointId: pair.endpointId,
      sourceKind: 'SOURCE_KIND_ENDPOINT',
      subjectId: pair.rolloutId,
      ...e,
    });

  /**
   * Whether the target can take traffic (canTakeTraffic): ready (scaled to zero
   * counts: it wakes), or changing its replica count with enough already serving;
   * at least `minReady` replicas serving when a step asks for them.
   */
  async function targetHealth(pair: RolloutPair & { minReady?: number }): Promise<{ ready: boolean; message: string }> {
    const d = await getEndpointDeployment(db, pair.endpointId, pair.targetDeploymentId);
    if (!d) return { ready: false, message: `the target deployment ${pair.targetDeploymentId} no longer exists` };
    const { state, message } = deploymentState(d);
    const enough = pair.minReady === undefined || d.ready_replicas >= pair.minReady;
    return {
      ready: canTakeTraffic(d, pair.minReady),
      message: `target ${d.name}: ${state} (${message})${enough ? '' : `, ${d.ready_replicas} of ${pair.minReady} replicas ready`}`,
    };
  }

  return {
    async recordRollout(a: { rolloutId: string; version: number; snapshot: RolloutSnapshot }): Promise<void> {
      await recordRolloutSnapshot(db, a.rolloutId, a.version, a.snapshot);
    },

    async rolloutEvent(
      a: RolloutPair & { type: string; level?: EndpointEvent['level']; message: string },
    ): Promise<void> {
      await event(a, { level: a.level ?? 'LEVEL_INFO', type: a.type, message: a.message });
    },

    rolloutTargetHealth: targetHealth,

    /**
     * Puts `percent` of the pair's traffic on the target. Other deployments of
     * the endpoint keep their weights; the pair shares what it had (100 when
     * the split was empty). `final` takes the source out of the split.
     */
    async setRolloutTraffic(a: RolloutPair & { percent: number; step?: number; final?: boolean }): Promise<void> {
      await withTransaction(db, async (tx) => {
        const { rows } = await tx.query<{ traffic_split: Array<{ deploymentId: string; weight: number }> }>(
          'SELECT traffic_split FROM endpoints WHERE id = $1 FOR UPDATE',
          [a.endpointId],
        );
        if (!rows[0]) throw new Error(`endpoint ${a.endpointId} is gone`);
        const pairIds = [a.sourceDeploymentId, a.targetDeploymentId];
        const split = rows[0].traffic_split;
        const others = split.filter((s) => !pairIds.includes(s.deploymentId));
        const pairWeight =
          split.filter((s) => pairIds.includes(s.deploymentId)).reduce((n, s) => n + s.weight, 0) || 100;
        const target = (pairWeight * a.percent) / 100;
        const next = [
          ...others,
          ...(a.final ? [] : [{ deploymentId: a.sourceDeploymentId, weight: pairWeight - target }]),
          { deploymentId: a.targetDeploymentId, weight: target },
        ];
        await updateEndpoint(tx, a.endpointId, { trafficSplit: next });
        await addEndpointEvent(tx, {
          endpointId: a.endpointId,
          sourceKind: 'SOURCE_KIND_ENDPOINT',
          subjectId: a.rolloutId,
          level: 'LEVEL_INFO',
          type: 'endpoint.traffic_changed',
          message:
            `Rollout ${a.rolloutId}${a.step !== undefined ? ` step ${a.step}` : ''}: ${a.percent}% to target ` +
            `${a.targetDeploymentId}${a.final ? '; source removed from the split' : `, ${100 - a.percent}% to source ${a.sourceDeploymentId}`}.`,
        });
      });
    },

    /** Records new replica bounds on an endpoint deployment (its workflow gets them by signal). */
    async noteRolloutReplicas(
      a: RolloutPair & { deploymentId: string; min: number; max: number; why: string },
    ): Promise<void> {
      await db.query(
        `UPDATE endpoint_deployments
            SET autoscaling = autoscaling || jsonb_build_object('minReplicas', $2::int, 'maxReplicas', $3::int),
                etag = $4, updated_at = now()
          WHERE id = $1`,
        [a.deploymentId, a.min, a.max, newEtag()],
      );
      await addEndpointEvent(db, {
        endpointId: a.endpointId,
        deploymentId: a.deploymentId,
        subjectId: a.rolloutId,
        sourceKind: 'SOURCE_KIND_DEPLOYMENT',
        level: 'LEVEL_INFO',
        type: 'deployment.replica_bounds_changed',
        message: `Rollout ${a.rolloutId}: replicas ${a.min}..${a.max} (${a.why}).`,
      });
    },

    /**
     * The gate after a step's soak: the target must be ready, each metric rule
     * is judged on the gateway's measurements (the target over the rule's
     * window; the source over the same span reaching back before the rollout
     * began, so a baseline exists even when the source has no traffic left),
     * and the target's error rate must stay under the built-in health limit.
     */
    async evaluateRolloutGate(
      a: RolloutPair & { rules: MetricRule[]; stepWindowSeconds: number; startedAtMs: number },
    ): Promise<GateResult> {
      const health = await targetHealth(a);
      if (!health.ready)
        return {
          pass: false,
          category: 'ROLLOUT_FAILURE_CATEGORY_TARGET_NOT_READY',
          message: health.message,
          metrics: [],
        };
      const now = Date.now();
      const metrics: MetricResult[] = [];
      for (const rule of a.rules) {
        const from = now - rule.windowSeconds * 1000;
        const target = measureMetric(
          await routerSeconds(db, a.targetDeploymentId, from, now),
          rule,
          rule.windowSeconds,
        );
        const sourceFrom = Math.min(from, a.startedAtMs - rule.windowSeconds * 1000);
        const source = rule.regressionCheck
          ? measureMetric(
              await routerSeconds(db, a.sourceDeploymentId, sourceFrom, now),
              rule,
              (now - sourceFrom) / 1000,
            )
          : null;
        metrics.push(judgeMetric(rule, target, source));
      }
      const breached = metrics.filter((m) => m.verdict === 'METRIC_VERDICT_BREACHED');
      if (breached.length)
        return {
          pass: false,
          category: 'ROLLOUT_FAILURE_CATEGORY_METRIC_REGRESSION',
          message: `The target breached ${breached.map((m) => `${m.name} (${m.targetValue})`).join(', ')}.`,
          metrics,
        };
      const unavailable = metrics.filter((m) => m.verdict === 'METRIC_VERDICT_UNAVAILABLE');
      if (unavailable.length)
        return {
          pass: false,
          category: 'ROLLOUT_FAILURE_CATEGORY_METRICS_UNAVAILABLE',
          message: `No gateway measurements for ${unavailable.map((m) => m.name).join(', ')} in the window (no requests reached the target).`,
          metrics,
        };
      const totals = routerTotals(await routerSeconds(db, a.targetDeploymentId, now - a.stepWindowSeconds * 1000, now));
      if (totals.requests >= HEALTH_MIN_REQUESTS && totals.errors / totals.requests > HEALTH_MAX_ERROR_RATE)
        return {
          pass: false,
          category: 'ROLLOUT_FAILURE_CATEGORY_HEALTH_REGRESSION',
          message: `${totals.errors} of ${totals.requests} requests to the target failed at the gateway during the step.`,
          metrics,
        };
      return { pass: true, message: `Gate passed (${totals.requests} target request(s) in the step).`, metrics };
    },
  };
}

export type RolloutActivities = ReturnType<typeof createRolloutActivities>;
