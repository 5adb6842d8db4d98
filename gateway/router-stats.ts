/**
 * What the inference gateway sees of each endpoint deployment (requests,
 * failures, latency), per second, for the rollout gates: `router_error_rate`,
 * `router_latency` and `inflight_requests` are measured here, at the router,
 * not reported by the replicas. Like the request counter, outcomes are
 * gathered in memory and written every `flushMs` in one statement.
 */
import type { Db } from '../db/pool';
import { ROUTER_LATENCY_BUCKETS_MS } from '../db/router-stats';

interface Second {
  requests: number;
  errors: number;
  sum: number;
  min: number;
  max: number;
  buckets: number[];
}

export class RouterStats {
  private pending = new Map<string, Second>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Db,
    flushMs = 200,
  ) {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  /** One request the gateway finished for an endpoint deployment; an error is a 5xx the caller got. */
  record(deploymentId: string, latencyMs: number, error: boolean): void {
    const key = `${deploymentId} ${Math.floor(Date.now() / 1000)}`;
    let s = this.pending.get(key);
    if (!s) {
      s = {
        requests: 0,
        errors: 0,
        sum: 0,
        min: Infinity,
        max: 0,
        buckets: new Array(ROUTER_LATENCY_BUCKETS_MS.length + 1).fill(0),
      };
      this.pending.set(key, s);
    }
    s.requests++;
    if (error) s.errors++;
    s.sum += latencyMs;
    s.min = Math.min(s.min, latencyMs);
    s.max = Math.max(s.max, latencyMs);
    const i = ROUTER_LATENCY_BUCKETS_MS.findIndex((bound) => latencyMs <= bound);
    s.buckets[i < 0 ? ROUTER_LATENCY_BUCKETS_MS.length : i]++;
  }

  async flush(): Promise<void> {
    if (!this.pending.size) return;
    const batch = [...this.pending].map(([key, s]) => {
      const [deployment_id, second] = key.split(' ');
      return {
        deployment_id,
        second: Number(second),
        requests: s.requests,
        errors: s.errors,
        sum: s.sum,
        mn: s.min,
        mx: s.max,
        buckets: s.buckets,
      };
    });
    this.pending = new Map();
    await this.db
      .query(
        `INSERT INTO endpoint_router_stats AS r (deployment_id, second, requests, errors, latency_ms_sum, latency_ms_min,
                                                latency_ms_max, latency_buckets)
         SELECT t.deployment_id, to_timestamp(t.second), t.requests, t.errors, t.sum, t.mn, t.mx, t.buckets
           FROM jsonb_to_recordset($1::jsonb)
                AS t(deployment_id text, second bigint, requests int, errors int, sum float8, mn float8, mx float8, buckets int[])
          WHERE EXISTS (SELECT 1 FROM endpoint_deployments WHERE id = t.deployment_id)
         ON CONFLICT (deployment_id, second) DO UPDATE SET
           requests = r.requests + EXCLUDED.requests,
           errors = r.errors + EXCLUDED.errors,
           latency_ms_sum = r.latency_ms_sum + EXCLUDED.latency_ms_sum,
           latency_ms_min = least(r.latency_ms_min, EXCLUDED.latency_ms_min),
           latency_ms_max = greatest(r.latency_ms_max, EXCLUDED.latency_ms_max),
           latency_buckets = ARRAY(SELECT a + b FROM unnest(r.latency_buckets, EXCLUDED.latency_buckets) WITH ORDINALITY AS u(a, b, i)
                                 ORDER BY i)`,
        [JSON.stringify(batch)],
      )
      .catch(() => undefined); // a lost flush leaves a moment unmeasured; gates read windows of seconds to minutes
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
