/**
 * One LISTEN session on PostgreSQL for a process: handlers per channel, and
 * whether the session is up. It reconnects after a loss, every second; while
 * it is down, users must assume they miss notifications (the principal cache
 * stops caching, claim long-polls re-check the table more often).
 */
import pg from 'pg';
import type { Logger } from '../platform/logger';

export class NotificationListener {
  private client: pg.Client | null = null;
  private listening = false;
  private stopped = false;
  private readonly handlers = new Map<string, Array<(payload: string) => void>>();
  private readonly stateHandlers: Array<(up: boolean) => void> = [];

  constructor(
    private readonly databaseUrl: string,
    private readonly logger: Logger,
    /** Who listens, for the log line when the session is lost. */
    private readonly purpose: string,
  ) {}

  /** Calls `handler` with each notification's payload on `channel` (register before start()). */
  on(channel: string, handler: (payload: string) => void): this {
    if (!/^[a-z_]+$/.test(channel)) throw new Error(`unexpected channel name ${channel}`);
    this.handlers.set(channel, [...(this.handlers.get(channel) ?? []), handler]);
    return this;
  }

  /** Calls `handler` whenever the session comes up (true) or is lost (false). */
  onState(handler: (up: boolean) => void): this {
    this.stateHandlers.push(handler);
    return this;
  }

  get up(): boolean {
    return this.listening;
  }

  /** Connects and LISTENs; on failure (or a later loss) it tries again every second until stop(). */
  async start(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    const lost = (why: string) => {
      if (this.client !== client) return;
      this.client = null;
      const was = this.listening;
      this.listening = false;
      if (was) for (const h of this.stateHandlers) h(false);
      if (this.stopped) return;
      this.logger.warn({ reason: why }, `${this.purpose}: notification channel lost, reconnecting`);
      setTimeout(() => void this.start(), 1000).unref();
    };
    client.on('error', (err) => lost(err.message));
    client.on('end', () => lost('connection ended'));
    client.on('notification', (n) => {
      for (const h of this.handlers.get(n.channel) ?? []) h(n.payload ?? '');
    });
    this.client = client;
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`);
      if (this.client !== client) return;
      this.listening = true;
      for (const h of this.stateHandlers) h(true);
    } catch (err) {
      lost((err as Error).message);
      await client.end().catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const client = this.client;
    this.client = null;
    const was = this.listening;
    this.listening = false;
    if (was) for (const h of this.stateHandlers) h(false);
    await client?.end().catch(() => undefined);
  }
}
