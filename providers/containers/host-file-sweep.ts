/**
 * A container host's sweep of the files it built for its replicas to mount (volume versions, model
 * revisions, adapters): without it they stay on the host's disk after their deployments are gone,
 * and model weights fill it. A sweep asks the runtime what its replicas mount, and each store
 * removes what is neither mounted nor claimed within GANTRY_HOST_FILES_KEEP_SECONDS
 * (host-file-uses.ts). Run every half keep time by host-housekeeping.ts.
 */
import { realpath } from 'node:fs/promises';

import type { ContainerRuntime } from './runtime';

/** A store of a host's mounted files that can remove what nothing uses. */
export interface SweptFiles {
  sweep(inUse: ReadonlySet<string>, keepMs: number): Promise<string[]>;
}

export class HostFileSweeper {
  constructor(
    private readonly runtime: Pick<ContainerRuntime, 'mountedHostDirs'>,
    private readonly stores: SweptFiles[],
    private readonly keepSeconds: number,
  ) {}

  /** One sweep now; answers the directories removed. `keepMs` replaces the configured keep time. */
  async sweep(keepMs = this.keepSeconds * 1000): Promise<string[]> {
    const mounted = await this.runtime.mountedHostDirs();
    const inUse = new Set(await Promise.all(mounted.map((dir) => realpath(dir).catch(() => dir))));
    const removed: string[] = [];
    for (const store of this.stores) removed.push(...(await store.sweep(inUse, keepMs)));
    return removed;
  }
}
