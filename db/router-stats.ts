/** The gateway's per-second view of endpoint deployments (written by api/router-stats.ts). */
import type { Queryable } from './pool';

/** Upper bounds (ms) of the latency histogram's buckets; one more bucket holds everything slower. */
export const ROUTER_LATENCY_BUCKETS_MS = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000];

export interface RouterSecond {
  second: number;
  requests: number;
  errors: number;
  latencySum: number;
  latencyMin: number;
  latencyMax: number;
  buckets: number[];
}

/** One deployment's seconds in [fromMs, toMs). */
export async function routerSeconds(
  db: Queryable,
  deploymentId: string,
  fromMs: number,
  toMs: number,
): Promise<RouterSecond[]> {
  const { rows } = await db.query(
    `SELECT extract(epoch FROM second)::bigint AS second, requests, errors, latency_ms_sum, latency_ms_min, latency_ms_max,
            latency_buckets
       FROM endpoint_router_stats
      WHERE deployment_id = $1 AND second >= to_timestamp($2::float8 / 1000) AND second < to_timestamp($3::float8 / 1000)
      ORDER BY second`,
    [deploymentId, fromMs, toMs],
  );
  return rows.map((r) => ({
    second: Number(r.second),
    requests: r.requests,
    errors: r.errors,
    latencySum: r.latency_ms_sum,
    latencyMin: r.latency_ms_min,
    latencyMax: r.latency_ms_max,
    buckets: r.latency_buckets,
  }));
}

/** Requests, errors and latency over some seconds. */
export function routerTotals(seconds: RouterSecond[]) {
  const t = { requests: 0, errors: 0, latencySum: 0, latencyMin: Infinity, latencyMax: 0 };
  for (const s of seconds) {
    t.requests += s.requests;
    t.errors += s.errors;
    t.latencySum += s.latencySum;
    t.latencyMin = Math.min(t.latencyMin, s.latencyMin);
    t.latencyMax = Math.max(t.latencyMax, s.latencyMax);
  }
  return t;
}

/** The value at `percentile` of the histogram, interpolated inside its bucket and kept within the observed range. */
export function histogramPercentile(seconds: RouterSecond[], percentile: number): number | null {
  const buckets = new Array<number>(ROUTER_LATENCY_BUCKETS_MS.length + 1).fill(0);
  for (const s of seconds) s.buckets.forEach((n, i) => (buckets[i] += n));
  const total = buckets.reduce((a, b) => a + b, 0);
  if (!total) return null;
  const { latencyMin, latencyMax } = routerTotals(seconds);
  const rank = (percentile / 100) * total;
  let below = 0;
  for (let i = 0; i < buckets.length; i++) {
    if (below + buckets[i] >= rank && buckets[i] > 0) {
      const lower = i === 0 ? 0 : ROUTER_LATENCY_BUCKETS_MS[i - 1];
      const upper = i < ROUTER_LATENCY_BUCKETS_MS.length ? ROUTER_LATENCY_BUCKETS_MS[i] : latencyMax;
      const value = lower + ((upper - lower) * (rank - below)) / buckets[i];
      return Math.min(latencyMax, Math.max(latencyMin, value));
    }
    below += buckets[i];
  }
  return latencyMax;
}
