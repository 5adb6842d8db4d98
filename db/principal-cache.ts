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
 * keys are cached too (a stream of made-up keys costs one query each per
 * `ttlMs`, not one per request); creating a key notifies the same channel
 * (migration 021), so a new key works at once.
 */
import { hash } from 'node:crypto';
import type { Logger } from '../platform/logger';
import { NotificationListener } from './notification-listener';
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
  /** Keys looked up and found to be no key at all (hashes), so a flood of them costs no queries. */
  private readonly unknown = new Map<string, number>();
  private readonly channel: NotificationListener;
  /** Bumped on every drop: a lookup that started before a drop must not store its (maybe stale) result. */
  private generation = 0;

  constructor(
    private readonly db: Db,
    databaseUrl: string,
    private readonly logger: Logger,
    private readonly opts: { ttlMs: number; maxEntries: number } = { ttlMs: 30_000, maxEntries: 10_000 },
  ) {
    // Anything could have changed while nobody listened: drop on every change of state.
    this.channel = new NotificationListener(databaseUrl, logger, 'principal cache')
      .on(CHANNEL, () => this.drop())
      .onState(() => this.drop());
  }

  /** Connects the LISTEN session; caching starts once it is up, and stops whenever it is down. */
  start(): Promise<void> {
    return this.channel.start();
  }

  async stop(): Promise<void> {
    await this.channel.stop();
    this.drop();
  }

  drop(): void {
    this.generation++;
    this.entries.clear();
    this.unknown.clear();
  }

  async lookup(secret: string): Promise<Principal | null> {
    if (!this.channel.up) return findPrincipalByApiKey(this.db, secret);
    const key = hash('sha256', secret, 'base64');
    const now = Date.now();
    const missed = this.unknown.get(key);
    if (missed !== undefined && now - missed < this.opts.ttlMs) return null;
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
    if (generation === this.generation && this.channel.up) {
      if (principal) {
        if (this.entries.size >= this.opts.maxEntries) this.entries.delete(this.entries.keys().next().value!);
        this.entries.set(key, { principal, cachedAt: now, useRecordedAt: now });
      } else {
        if (this.unknown.size >= this.opts.maxEntries) this.unknown.delete(this.unknown.keys().next().value!);
        this.unknown.set(key, now);
      }
    }
    return principal;
  }
}
