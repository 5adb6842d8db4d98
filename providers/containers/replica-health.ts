/**
 * What every container runtime does the same way around a launch: wait until the replica's
 * health check answers.
 */
import { setTimeout as sleep } from 'node:timers/promises';

import { replicaUrl } from '../../shared/deployments';
import { ReplicaFailed, type ReplicaExit } from './runtime';

/**
 * Resolves once `<origin><healthPath>` answers 2xx (the replica's origin: replicaOrigin). Fails when the replica exits
 * first, when it answers with a redirect, or when `timeoutMs` passes (after calling `stop`).
 *
 * The check is made from the container host's own network, so it asks the replica's own address
 * and port only: a redirect is never followed (the replica could point it at any service of the
 * host's network), and the health path cannot name another origin (replicaUrl).
 */
export async function waitUntilHealthy(opts: {
  origin: string;
  healthPath: string;
  timeoutMs: number;
  exited: Promise<ReplicaExit>;
  onProgress: () => void;
  /** Stops the replica: the launch failed. */
  stop: () => Promise<void>;
}): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let gone = false;
  void opts.exited.then(() => (gone = true));
  let url: string;
  try {
    url = replicaUrl(opts.origin, opts.healthPath);
  } catch (err) {
    await opts.stop();
    throw new ReplicaFailed(`health_check_path: ${(err as Error).message}.`);
  }
  for (;;) {
    opts.onProgress();
    if (gone) {
      const e = await opts.exited;
      throw new ReplicaFailed(`The replica exited before it was healthy (code ${e.code}, signal ${e.signal}).`);
    }
    let status: number | undefined;
    try {
      const res = await fetch(url, { redirect: 'manual', signal: AbortSignal.timeout(2000) });
      await res.body?.cancel();
      status = res.status;
    } catch {
      // not listening yet
    }
    if (status !== undefined && status >= 200 && status < 300) return;
    if (status !== undefined && status >= 300 && status < 400) {
      await opts.stop();
      throw new ReplicaFailed(
        `The health check on ${opts.healthPath} answered a redirect (HTTP ${status}), which is not followed: it must answer 2xx itself.`,
      );
    }
    if (Date.now() > deadline) {
      await opts.stop();
      throw new ReplicaFailed(`No healthy answer on ${opts.healthPath} within ${opts.timeoutMs / 1000}s.`);
    }
    await sleep(100);
  }
}
