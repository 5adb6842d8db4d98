/**
 * What every container runtime does the same way around a launch: wait until the replica's
 * health check answers.
 */
import { setTimeout as sleep } from 'node:timers/promises';

import { ReplicaFailed, type ReplicaExit } from './runtime';

/**
 * Resolves once `<origin><healthPath>` answers 2xx (the replica's origin: replicaOrigin). Fails when the replica exits
 * first, or when `timeoutMs` passes (after calling `onTimeout`, which stops it).
 */
export async function waitUntilHealthy(opts: {
  origin: string;
  healthPath: string;
  timeoutMs: number;
  exited: Promise<ReplicaExit>;
  onProgress: () => void;
  onTimeout: () => Promise<void>;
}): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let gone = false;
  void opts.exited.then(() => (gone = true));
  for (;;) {
    opts.onProgress();
    if (gone) {
      const e = await opts.exited;
      throw new ReplicaFailed(`The replica exited before it was healthy (code ${e.code}, signal ${e.signal}).`);
    }
    try {
      const res = await fetch(`${opts.origin}${opts.healthPath}`, { signal: AbortSignal.timeout(2000) });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await opts.onTimeout();
      throw new ReplicaFailed(`No healthy answer on ${opts.healthPath} within ${opts.timeoutMs / 1000}s.`);
    }
    await sleep(100);
  }
}
