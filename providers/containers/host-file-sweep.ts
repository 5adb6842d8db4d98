/**
 * A container host's housekeeping of the files it built for its replicas to mount (volume
 * versions, model revisions, adapters): without it they stay on the host's disk after their
 * deployments are gone, and model weights fill it. Every so often (half the keep time, between a
 * second and ten minutes) it asks the runtime what its replicas mount, and each store removes what
 * is neither mounted nor claimed within GANTRY_HOST_FILES_KEEP_SECONDS (host-file-uses.ts).
 *
 * Local and idempotent, so a timer in the host process rather than a workflow: a sweep that fails
 * or is cut short by a restart is the next one's to finish, and losing one loses nothing.
 */
import { realpath } from 'node:fs/promises';

import type { Logger } from 'pino';
import type { ContainerRuntime } from './runtime';

/** A store of a host's mounted files that can remove what nothing uses. */
export interface SweptFiles {
  sweep(inUse: ReadonlySet<string>, keepMs: number): Promise<string[]>;
}

export class HostFileSweeper {
  private timer?: NodeJS.Timeout;
  private current?: Promise<unknown>;

  constructor(
    private readonly runtime: Pick<ContainerRuntime, 'mountedHostDirs'>,
    private readonly stores: SweptFiles[],
    private readonly keepSeconds: number,
    private readonly logger: Logger,
  ) {}

  /** One sweep now; answers the directories removed. `keepMs` replaces the configured keep time. */
  async sweep(keepMs = this.keepSeconds * 1000): Promise<string[]> {
    const mounted = await this.runtime.mountedHostDirs();
    const inUse = new Set(await Promise.all(mounted.map((dir) => realpath(dir).catch(() => dir))));
    const removed: string[] = [];
    for (const store of this.stores) removed.push(...(await store.sweep(inUse, keepMs)));
    return removed;
  }

  start(): void {
    const everyMs = Math.min(600_000, Math.max(1000, (this.keepSeconds * 1000) / 2));
    this.timer = setInterval(() => {
      if (this.current) return; // the last one is still at work
      this.current = this.sweep()
        .then(
          (removed) => {
            if (removed.length) this.logger.info({ removed }, 'removed host files no replica used');
          },
          (err: Error) =>
            this.logger.warn({ err: err.message }, 'host files not swept this time (the next sweep tries again)'),
        )
        .finally(() => (this.current = undefined));
    }, everyMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.current;
  }
}
