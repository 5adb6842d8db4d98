/**
 * Requests the gateway sends to each deployment, counted per second for the
 * HTTPTotalRequests autoscaler, and how long they took to answer (for the
 * HTTPAvgRequestDuration autoscaler). Counting in memory and writing the counts
 * every `flushMs` (one statement for all deployments) keeps a database round
 * trip off every request; the autoscaler reads windows of a minute or more,
 * so a fraction of a second of delay changes nothing it decides.
 */
import type { Db } from '../db/pool';

export class RequestCounter {
  /** Per deployment and second: requests sent, requests answered, and the answers' summed milliseconds. */
  private pending = new Map<string, Map<number, { requests: number; answered: number; ms: number }>>();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly db: Db,
    flushMs = 200,
  ) {
    this.timer = setInterval(() => void this.flush(), flushMs);
    this.timer.unref();
  }

  count(deploymentId: string): void {
    this.slot(deploymentId).requests++;
  }

  /** A request to the deployment was answered, `ms` after it was sent (counted in the second it ended). */
  answered(deploymentId: string, ms: number): void {
    const slot = this.slot(deploymentId);
    slot.answered++;
    slot.ms += ms;
  }

  private slot(deploymentId: string) {
    const second = Math.floor(Date.now() / 1000);
    const perSecond = this.pending.get(deploymentId) ?? new Map();
    this.pending.set(deploymentId, perSecond);
    let slot = perSecond.get(second);
    if (!slot) perSecond.set(second, (slot = { requests: 0, answered: 0, ms: 0 }));
    return slot;
  }

  async flush(): Promise<void> {
    if (!this.pending.size) return;
    const batch = this.pending;
    this.pending = new Map();
    const ids: string[] = [];
    const seconds: number[] = [];
    const counts: number[] = [];
    const answered: number[] = [];
    const ms: number[] = [];
    for (const [id, perSecond] of batch) {
      for (const [second, slot] of perSecond) {
        ids.push(id);
        seconds.push(second);
        counts.push(slot.requests);
        answered.push(slot.answered);
        ms.push(slot.ms);
      }
    }
    await this.db
      .query(
        `INSERT INTO deployment_request_counts (deployment_id, second, requests, answered, duration_ms)
         SELECT d, to_timestamp(s), n, a, m
           FROM unnest($1::text[], $2::bigint[], $3::int[], $4::int[], $5::float8[]) AS t(d, s, n, a, m)
          WHERE EXISTS (SELECT 1 FROM deployments WHERE id = d)
         ON CONFLICT (deployment_id, second) DO UPDATE
           SET requests = deployment_request_counts.requests + EXCLUDED.requests,
               answered = deployment_request_counts.answered + EXCLUDED.answered,
               duration_ms = deployment_request_counts.duration_ms + EXCLUDED.duration_ms`,
        [ids, seconds, counts, answered, ms],
      )
      .catch(() => undefined); // a lost flush under-counts a moment; the next requests count again
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
