/**
 * What API keys resolve to, cached in the API process. Every request needs
 * its principal; looking it up is a database round trip that costs more than
 * most handlers. Entries live at most `ttlMs`, and the whole cache is dropped
 * the moment PostgreSQL notifies channel `gantry_principals` (triggers on keys,
 * memberships, projects, organizations and users: migration 013), so a
 * revoked key stops working as soon as the notification arrives.
 *
 * Safe by default: while the LISTEN connection is not up (starting, lost,
 * reconnecting) nothing is cached and every request looks its key up. Unknown
 * keys are never cached, so a new key works at once.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../common/logger';
import { findPrincipalByApiKey, recordApiKeyUse, type Principal } from './accounts';
import type { Db } from './pool';

const CHANNEL = 'gantry_principals';
const USE_RECORD_MS = 60_000;

interface Entry {
  principal: Principal;
  cachedAt: number;
  useRecordedAt: number;
}

export class PrincipalCache {
  private readonly entries = new Map<string, Entry>();
  private listener: pg.Client | null = null;
  private listening = false;
  private stopped = false;
  /** Bumped on every drop: a lookup that started before a drop must not store its (maybe stale) result. */
  private generation = 0;

  constructor(
    private readonly db: Db,
    private readonly databaseUrl: string,
    private readonly logger: Logger,
    private readonly opts: { ttlMs: number; maxEntries: number } = { ttlMs: 30_000, maxEntries: 10_000 },
  ) {}

  /** Connects the LISTEN session; caching starts once it is up, and stops whenever it is down. */
  async start(): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    const lost = (why: string) => {
      if (this.listener !== client) return;
      this.listener = null;
      this.listening = false;
      this.drop();
      if (this.stopped) return;
      this.logger.warn({ reason: why }, 'principal cache off until its notification channel reconnects');
      setTimeout(() => void this.start(), 1000).unref();
    };
    client.on('error', (err) => lost(err.message));
    client.on('end', () => lost('connection ended'));
    client.on('notification', () => this.drop());
    this.listener = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      if (this.listener !== client) return;
      this.drop(); // anything could have changed while nobody listened
      this.listening = true;
    } catch (err) {
      lost((err as Error).message);
      await client.end().catch(() => undefined);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const client = this.listener;
    this.listener = null;
    this.listening = false;
    this.drop();
    await client?.end().catch(() => undefined);
  }

  drop(): void {
    this.generation++;
    this.entries.clear();
  }

  async lookup(secret: string): Promise<Principal | null> {
    if (!this.listening) return findPrincipalByApiKey(this.db, secret);
    const key = createHash('sha256').update(secret, 'utf8').digest('base64');
    const now = Date.now();
    const hit = this.entries.get(key);
    if (hit && now - hit.cachedAt < this.opts.ttlMs) {
      if (now - hit.useRecordedAt >= USE_RECORD_MS) {
        hit.useRecordedAt = now;
        recordApiKeyUse(this.db, hit.principal.apiKeyId).catch((err: Error) =>
          this.logger.warn({ err: err.message }, 'could not record API key use'),
        );
      }
      return hit.principal;
    }
    const generation = this.generation;
    const principal = await findPrincipalByApiKey(this.db, secret);
    if (principal && generation === this.generation && this.listening) {
      if (this.entries.size >= this.opts.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(key, { principal, cachedAt: now, useRecordedAt: now });
    }
    return principal;
  }
}
