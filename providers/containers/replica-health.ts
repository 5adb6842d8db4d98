/**
 * What every container runtime does the same way around a launch: pick a free
 * host port for the replica, and wait until its health check answers.
 */
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

import { ReplicaFailed, type ReplicaExit } from './runtime';

/** A TCP port free on the loopback address right now. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * Resolves once `http://127.0.0.1:<port><healthPath>` answers 2xx. Fails when the replica exits
 * first, or when `timeoutMs` passes (after calling `onTimeout`, which stops it).
 */
export async function waitUntilHealthy(opts: {
  port: number;
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
      const res = await fetch(`http://127.0.0.1:${opts.port}${opts.healthPath}`, { signal: AbortSignal.timeout(2000) });
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
