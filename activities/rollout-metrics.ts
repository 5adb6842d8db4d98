/**
 * A rollout gate's metric values from the gateway's per-second records:
 *   router_error_rate  failed / all requests (AVG), or the lowest / highest per-second rate (MIN / MAX);
 *   router_latency     mean latency in ms (AVG), or a percentile interpolated in the latency histogram;
 *   inflight_requests  requests in flight, by Little's law: time spent in requests over the window (AVG),
 *                      or per second (MIN / MAX, idle seconds counting 0).
 * null when nothing was measured (no request in the window), except in-flight, where no request is 0.
 */
import type { MetricRule } from '../shared/rollouts';
import { histogramPercentile, routerTotals, type RouterSecond } from '../db/router-stats';

export function measureMetric(seconds: RouterSecond[], rule: MetricRule, windowSeconds: number): number | null {
  const totals = routerTotals(seconds);
  const busy = seconds.filter((s) => s.requests > 0);
  switch (rule.name) {
    case 'router_error_rate': {
      if (!totals.requests) return null;
      const rates = busy.map((s) => s.errors / s.requests);
      if (rule.stat === 'METRIC_STAT_TYPE_MIN') return Math.min(...rates);
      if (rule.stat === 'METRIC_STAT_TYPE_MAX') return Math.max(...rates);
      return totals.errors / totals.requests;
    }
    case 'router_latency':
      if (!totals.requests) return null;
      if (rule.stat === 'METRIC_STAT_TYPE_PERCENTILE') return histogramPercentile(seconds, rule.percentile!);
      return totals.latencySum / totals.requests;
    case 'inflight_requests': {
      const perSecond = seconds.map((s) => s.latencySum / 1000);
      const idleSeconds = Math.max(0, Math.round(windowSeconds) - seconds.length);
      if (rule.stat === 'METRIC_STAT_TYPE_MAX') return Math.max(0, ...perSecond);
      if (rule.stat === 'METRIC_STAT_TYPE_MIN') return idleSeconds > 0 ? 0 : Math.min(...perSecond);
      return totals.latencySum / 1000 / Math.max(1, windowSeconds);
    }
  }
}
