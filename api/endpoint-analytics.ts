/**
 * An endpoint's analytics (the SDK's beta.endpoints.analytics) from what the gateway measured:
 * its per-second router records of each deployment (requests, failures, the latency histogram)
 * and the tokens it relayed, which are per endpoint. What the gateway does not measure (time to
 * first token, inter-token latency, batching, resource utilization) is left out rather than
 * guessed. Latency percentiles are interpolated in the histogram's buckets
 * (db/router-stats.ts ROUTER_LATENCY_BUCKETS_MS), as the rollout gates read them.
 */
import { histogramPercentile, routerTotals, type RouterSecond } from '../db/router-stats';

export interface AnalyticsRange {
  fromMs: number;
  toMs: number;
}

const iso = (ms: number) => new Date(ms).toISOString();
const round = (n: number) => Math.round(n * 1000) / 1000;

/** Request, error and latency metrics of some router seconds over `range`. */
export function routerMetrics(seconds: RouterSecond[], range: AnalyticsRange) {
  const t = routerTotals(seconds);
  const span = (range.toMs - range.fromMs) / 1000;
  const percentile = (p: number) => {
    const v = histogramPercentile(seconds, p);
    return v === null ? undefined : round(v);
  };
  return {
    requestMetrics: {
      totalRequests: String(t.requests),
      successfulRequests: String(t.requests - t.errors),
      failedRequests: String(t.errors),
      requestsPerSecond: round(t.requests / span),
    },
    errorMetrics: { errorRate: t.requests ? round((100 * t.errors) / t.requests) : 0 },
    latencyMetrics: {
      latencyP50Ms: percentile(50),
      latencyP90Ms: percentile(90),
      latencyP99Ms: percentile(99),
    },
    throughputMetrics: { requestsPerSecond: round((t.requests - t.errors) / span) },
  };
}

/** Token totals and averages per successful request. */
export function tokenMetrics(tokens: { input: number; output: number }, successfulRequests: number) {
  return {
    totalInputTokens: String(tokens.input),
    totalOutputTokens: String(tokens.output),
    ...(successfulRequests
      ? {
          avgInputTokens: round(tokens.input / successfulRequests),
          avgOutputTokens: round(tokens.output / successfulRequests),
        }
      : {}),
  };
}

/** The router seconds in buckets of `bucketMs` from the range's start, each with its request and latency values. */
export function timeSeries(seconds: RouterSecond[], range: AnalyticsRange, bucketMs: number) {
  const buckets = Array.from({ length: Math.ceil((range.toMs - range.fromMs) / bucketMs) }, () => [] as RouterSecond[]);
  for (const s of seconds) buckets[Math.floor((s.second * 1000 - range.fromMs) / bucketMs)]?.push(s);
  return buckets.map((inBucket, i) => {
    const start = range.fromMs + i * bucketMs;
    const m = routerMetrics(inBucket, { fromMs: start, toMs: Math.min(start + bucketMs, range.toMs) });
    const values: Record<string, number> = {
      totalRequests: Number(m.requestMetrics.totalRequests),
      failedRequests: Number(m.requestMetrics.failedRequests),
      requestsPerSecond: m.requestMetrics.requestsPerSecond,
      errorRate: m.errorMetrics.errorRate,
    };
    for (const [k, v] of Object.entries(m.latencyMetrics)) if (v !== undefined) values[k] = v;
    return { timestamp: iso(start), values };
  });
}

/** `1m`, `15m`, `1h`, `1d` … in milliseconds. */
export function granularityMs(granularity: string): number {
  const n = Number(granularity.slice(0, -1));
  const unit = { m: 60_000, h: 3_600_000, d: 86_400_000 }[granularity.slice(-1) as 'm' | 'h' | 'd'];
  return n * unit;
}

export const timeRange = (range: AnalyticsRange) => ({ startTime: iso(range.fromMs), endTime: iso(range.toMs) });
