/**
 * A container host's housekeeping of replica logs, which replicas write themselves and nothing
 * else bounds: a chatty or hostile replica would fill the disk the host shares with every other
 * tenant's (and, under `./dev up`, with the database).
 *
 * - Every few seconds (host-housekeeping.ts), the log of each replica this host holds that outgrew
 *   GANTRY_REPLICA_LOG_MAX_BYTES is rotated (replica-log.ts): at most that file and the one
 *   before it are kept, and the logs route reads across the two (log-tail.ts).
 * - With the host's file sweep (host-file-sweep.ts), the files of replicas the logs route can no
 *   longer show (their deployment is gone, or no longer lists them) are removed once they have not
 *   been written for the keep time.
 */
import { lstat, readdir, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

import type { Logger } from 'pino';
import { listedReplicas } from '../../db/deployments';
import type { Queryable } from '../../db/pool';
import type { SweptFiles } from './host-file-sweep';
import { rotateReplicaLog } from './replica-log';
import type { ContainerRuntime } from './runtime';

/** A container deployment's id (newId('dep')). */
const DEPLOYMENT_ID = /^dep-[0-9a-f-]{36}$/;
/** A replica's files in its deployment's log directory: its log, its rotated log, its root (process runtime). */
const REPLICA_FILE = /^(.+?)\.(log|log\.1|log\.1\.partial|root)$/;

export class ReplicaLogKeeper implements SweptFiles {
  constructor(
    private readonly runtime: Pick<ContainerRuntime, 'logDir' | 'logFile' | 'heldReplicas'>,
    private readonly db: Queryable,
    private readonly maxBytes: number,
    private readonly logger: Logger,
  ) {}

  /** Rotates each held replica's log that outgrew its limit; answers those rotated. One that fails stops no other. */
  async rotate(): Promise<string[]> {
    const rotated: string[] = [];
    for (const r of this.runtime.heldReplicas()) {
      const file = this.runtime.logFile(r.deploymentId, r.replicaId);
      try {
        if (await rotateReplicaLog(this.runtime.logDir, file, this.maxBytes)) rotated.push(file);
      } catch (err) {
        this.logger.warn({ file, err: (err as Error).message }, 'replica log not rotated this time');
      }
    }
    return rotated;
  }

  /** The files of replicas no deployment lists, not written for `keepMs`; answers those removed. */
  async sweep(_inUse: ReadonlySet<string>, keepMs: number): Promise<string[]> {
    const logDir = this.runtime.logDir;
    // Only names of deployments: not the process runtime's records (`.hosts`), nor what else a
    // volume may hold (`lost+found`).
    const deployments = (await readdir(logDir).catch(() => [])).filter((name) => DEPLOYMENT_ID.test(name));
    if (!deployments.length) return [];
    const listed = await listedReplicas(this.db, deployments);
    const held = this.runtime.heldReplicas();
    const unusedSince = Date.now() - keepMs;
    const removed: string[] = [];
    for (const deploymentId of deployments) {
      const dir = path.join(logDir, deploymentId);
      const replicas = listed.get(deploymentId);
      for (const name of await readdir(dir).catch(() => [])) {
        const replicaId = REPLICA_FILE.exec(name)?.[1];
        if (!replicaId || replicas?.has(replicaId) || held.some((h) => h.replicaId === replicaId)) continue;
        const file = path.join(dir, name);
        const st = await lstat(file).catch(() => null);
        if (!st || st.mtimeMs > unusedSince) continue;
        await rm(file, { recursive: true, force: true });
        removed.push(file);
      }
      // A deployment that is gone leaves no directory once its last file went.
      if (!replicas && !held.some((h) => h.deploymentId === deploymentId)) await rmdir(dir).catch(() => undefined);
    }
    return removed;
  }
}
