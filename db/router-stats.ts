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
