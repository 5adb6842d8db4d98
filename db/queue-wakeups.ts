/**
 * Wakes claim long-polls when their queue gets a pending job, so a waiting
 * worker holds no database connection and costs no queries while it waits:
 * channel gantry_queue carries the deployment's id, and every claim waiting on
 * that deployment tries again. A submit announces its job after the commit
 * (`jobPending`: its own process's claims at once, the other processes by at
 * most one notification per queue every NOTIFY_SPACING_MS, migration 029); a
 * job back in the queue is notified by PostgreSQL (migration 021's trigger).
 *
 * A version per deployment closes the gap between a claim's empty query and
 * its wait: `wait` returns at once when a notification arrived since the
 * version the caller read before querying. While the notification channel is
 * down, waits end after a short interval, so claims fall back to polling.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../platform/logger';
import { NotificationListener } from './notification-listener';
import type { Queryable } from './pool';

const CHANNEL = 'gantry_queue';
/**
 * The least time between two notifications of one queue from one process. Each is a transaction
 * of its own, delivered to every listening connection: sent back to back under load (one for every
 * three or four submits) they cost PostgreSQL about a third of its work per submit. Spaced, a
 * claim waiting in another process hears of a job at most this much later; this process's own
 * claims wake at once.
 */
const NOTIFY_SPACING_MS = 5;
/** How often a waiting claim re-checks the table while notifications may be missed. */
const POLL_WHILE_DOWN_MS = 250;

export class QueueWakeups {
  private readonly channel: NotificationListener;
  private readonly versions = new Map<string, number>();
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Marks this process's own notifications, which it has acted on already. */
  private readonly sender = randomUUID();
  /** Queues with a notification on its way or waiting its turn; true when another is due after it. */
  private readonly notifying = new Map<string, boolean>();

  constructor(
    databaseUrl: string,
    private readonly logger: Logger,
  ) {
    this.channel = new NotificationListener(databaseUrl, logger, 'queue claims')
      .on(CHANNEL, (payload) => {
        const [deploymentId, sender] = payload.split('\n');
        if (sender !== this.sender) this.wake(deploymentId);
      })
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

  /**
   * A job was submitted to the deployment's queue and committed: this process's waiting claims try
   * again at once, and a notification tells the other processes: at once when the queue's last one
   * began NOTIFY_SPACING_MS ago or more; otherwise the job rides on the next, sent when that time
   * is up. Under load, one notification covers the jobs of a few milliseconds.
   */
  jobPending(db: Queryable, deploymentId: string): void {
    this.wake(deploymentId);
    if (this.notifying.has(deploymentId)) {
      this.notifying.set(deploymentId, true);
      return;
    }
    const send = (): void => {
      // Jobs that commit from here on may come too late for this notification: they mark another as due.
      this.notifying.set(deploymentId, false);
      const began = performance.now();
      void notifyJobPending(db, deploymentId, this.sender)
        .catch((err: Error) =>
          // Claims waiting in other processes find the job when their wait ends.
          this.logger.warn({ err: err.message, deploymentId }, 'could not notify other API processes of a queued job'),
        )
        .finally(() => {
          // The queue's turn ends NOTIFY_SPACING_MS after this one began: jobs until then ride on the
          // next. Rounded up: a timer's milliseconds are whole, and one rounded down would come early.
          const turnEnds = Math.ceil(began + NOTIFY_SPACING_MS - performance.now());
          setTimeout(() => (this.notifying.get(deploymentId) ? send() : this.notifying.delete(deploymentId)), turnEnds);
        });
    };
    send();
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

/** Tells every process's waiting claims that the deployment's queue has a job (for a process with no QueueWakeups). */
export async function notifyJobPending(db: Queryable, deploymentId: string, sender = ''): Promise<void> {
  await db.query('SELECT pg_notify($1, $2)', [CHANNEL, `${deploymentId}\n${sender}`]);
}
