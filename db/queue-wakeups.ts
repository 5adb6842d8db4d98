/**
 * Wakes claim long-polls when their queue gets a pending job, so a waiting
 * worker holds no database connection and costs no queries while it waits:
 * PostgreSQL notifies channel gantry_queue with the deployment's id (migration
 * 021), and every claim waiting on that deployment tries again.
 *
 * A version per deployment closes the gap between a claim's empty query and
 * its wait: `wait` returns at once when a notification arrived since the
 * version the caller read before querying. While the notification channel is
 * down, waits end after a short interval, so claims fall back to polling.
 */
import type { Logger } from '../platform/logger';
import { NotificationListener } from './notification-listener';

const CHANNEL = 'gantry_queue';
/** How often a waiting claim re-checks the table while notifications may be missed. */
const POLL_WHILE_DOWN_MS = 250;

export class QueueWakeups {
  private readonly channel: NotificationListener;
  private readonly versions = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(databaseUrl: string, logger: Logger) {
    this.channel = new NotificationListener(databaseUrl, logger, 'queue claims')
      .on(CHANNEL, (deploymentId) => this.wake(deploymentId))
      // Back up: whatever was notified while down is unknown, so every waiter looks again.
      .onState((up) => up && [...this.waiters.keys()].forEach((id) => this.wake(id)));
  }

  start(): Promise<void> {
    return this.channel.start();
  }

  stop(): Promise<void> {
    for (const id of [...this.waiters.keys()]) this.wake(id);
    return this.channel.stop();
  }

  /** Read before looking for a job; hand to `wait` after finding none. */
  version(deploymentId: string): number {
    return this.versions.get(deploymentId) ?? 0;
  }

  /**
   * Resolves when the deployment's queue may have a job (a notification since `seen`), after
   * `maxMs`, or when `signal` aborts, whichever is first.
   */
  async wait(deploymentId: string, seen: number, maxMs: number, signal?: AbortSignal): Promise<void> {
    if (this.version(deploymentId) !== seen || signal?.aborted) return;
    const limit = this.channel.up ? maxMs : Math.min(maxMs, POLL_WHILE_DOWN_MS);
    await new Promise<void>((resolve) => {
      const set = this.waiters.get(deploymentId) ?? new Set<() => void>();
      this.waiters.set(deploymentId, set);
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        set.delete(done);
        if (!set.size && this.waiters.get(deploymentId) === set) this.waiters.delete(deploymentId);
        resolve();
      };
      const timer = setTimeout(done, limit);
      signal?.addEventListener('abort', done, { once: true });
      set.add(done);
    });
  }

  /** Claims waiting on the deployment's queue now (what an operator or a test can watch). */
  waiting(deploymentId: string): number {
    return this.waiters.get(deploymentId)?.size ?? 0;
  }

  private wake(deploymentId: string): void {
    this.versions.set(deploymentId, this.version(deploymentId) + 1);
    // Versions of idle queues would pile up: keep them only while someone may read them.
    if (this.versions.size > 10_000) this.versions.clear();
    for (const done of [...(this.waiters.get(deploymentId) ?? [])]) done();
  }
}
