/**
 * Requests the gateway sends to each deployment, counted per second for the
 * HTTPTotalRequests autoscaler. Counting in memory and writing the counts
 * every `flushMs` (one statement for all deployments) keeps a database round
 * trip off every request; the autoscaler reads windows of a minute or more,
 * so a fraction of a second of delay changes nothing it decides.
 */
import type { Db } from '../db/pool';

export class RequestCounter {
  private pending = new Map<string, Map<number, number>>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Db,
    flushMs = 200,
  ) {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  count(deploymentId: string): void {
    const second = Math.floor(Date.now() / 1000);
    const perSecond = this.pending.get(deploymentId) ?? new Map<number, number>();
    perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
    this.pending.set(deploymentId, perSecond);
  }

  async flush(): Promise<void> {
    if (!this.pending.size) return;
    const batch = this.pending;
    this.pending = new Map();
    const ids: string[] = [];
    const seconds: number[] = [];
    const counts: number[] = [];
    for (const [id, perSecond] of batch) {
      for (const [second, n] of perSecond) {
        ids.push(id);
        seconds.push(second);
        counts.push(n);
      }
    }
    await this.db
      .query(
        `INSERT INTO deployment_request_counts (deployment_id, second, requests)
         SELECT d, to_timestamp(s), n FROM unnest($1::text[], $2::bigint[], $3::int[]) AS t(d, s, n)
          WHERE EXISTS (SELECT 1 FROM deployments WHERE id = d)
         ON CONFLICT (deployment_id, second) DO UPDATE
           SET requests = deployment_request_counts.requests + EXCLUDED.requests`,
        [ids, seconds, counts],
      )
      .catch(() => undefined); // a lost flush under-counts a moment; the next requests count again
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
