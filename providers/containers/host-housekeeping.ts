/**
 * A container host's keeping of its disk, as every host process runs it (the control worker under
 * `./dev up`, the container host on its own under docker-compose, the test platform): the sweep of
 * the files its replicas mounted and of replica logs nothing lists (host-file-sweep.ts), and the
 * rotation of its replicas' logs (replica-log-keeper.ts). Each on a timer of its own in this
 * process (platform/repeat.ts).
 */
import type { Logger } from 'pino';
import type { Queryable } from '../../db/pool';
import type { GantryConfig } from '../../platform/config';
import { repeat } from '../../platform/repeat';
import type { AdapterFiles } from './adapter-files';
import { HostFileSweeper } from './host-file-sweep';
import { ReplicaLogKeeper } from './replica-log-keeper';
import type { ContainerRuntime } from './runtime';
import type { VolumeStore } from './volume-store';

/** How often the logs of held replicas are measured for rotation. */
const ROTATE_EVERY_MS = 5000;

export interface HostHousekeeping {
  files: HostFileSweeper;
  logs: ReplicaLogKeeper;
  /** Stops both timers, waiting for a round under way. */
  stop(): Promise<void>;
}

export function startHostHousekeeping(opts: {
  runtime: ContainerRuntime;
  stores: { volumes: VolumeStore; adapters: AdapterFiles };
  db: Queryable;
  config: Pick<GantryConfig, 'hostFilesKeepSeconds' | 'replicaLogMaxBytes'>;
  logger: Logger;
}): HostHousekeeping {
  const { runtime, stores, db, config, logger } = opts;
  const logs = new ReplicaLogKeeper(runtime, db, config.replicaLogMaxBytes, logger);
  const files = new HostFileSweeper(runtime, [stores.volumes, stores.adapters, logs], config.hostFilesKeepSeconds);
  const sweeping = repeat(
    async () => {
      const removed = await files.sweep();
      if (removed.length) logger.info({ removed }, 'removed host files no replica used');
    },
    // Half the keep time, so a mounted directory is marked used at least twice within it.
    Math.min(600_000, Math.max(1000, (config.hostFilesKeepSeconds * 1000) / 2)),
    (err) => logger.warn({ err: err.message }, 'host files not swept this time (the next sweep tries again)'),
  );
  const rotating = repeat(
    async () => {
      const rotated = await logs.rotate();
      if (rotated.length) logger.info({ rotated }, 'replica logs over their size limit rotated');
    },
    ROTATE_EVERY_MS,
    (err) => logger.warn({ err: err.message }, 'replica logs not rotated this time'),
  );
  return {
    files,
    logs,
    async stop() {
      await Promise.all([sweeping.stop(), rotating.stop()]);
    },
  };
}
