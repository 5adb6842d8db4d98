/**
 * The replicas a runtime holds on this host, by replica id, and what every
 * runtime does the same way with them: wait for one to exit, and let go of all
 * of them when the worker leaves them running for its next process.
 */
import type { ReplicaExit } from './runtime';

export interface HeldReplica {
  deploymentId: string;
  /** Resolves when the replica has exited. */
  exited: Promise<ReplicaExit>;
  /** Lets go of whatever keeps this process attached (a child process, a waiter), leaving the replica running. */
  release?: () => void;
}

export class HeldReplicas<H extends HeldReplica> extends Map<string, H> {
  /** Resolves when the replica exits; null when this host does not hold it (it was lost). */
  async waitForExit(replicaId: string, signal: AbortSignal): Promise<ReplicaExit | null> {
    const r = this.get(replicaId);
    if (!r) return null;
    const aborted = new Promise<'aborted'>((resolve) =>
      signal.addEventListener('abort', () => resolve('aborted'), { once: true }),
    );
    const outcome = await Promise.race([r.exited, aborted]);
    if (outcome === 'aborted') throw signal.reason ?? new Error('aborted');
    this.delete(replicaId);
    return outcome;
  }

  /** The replicas held, by deployment. */
  list(): Array<{ deploymentId: string; replicaId: string }> {
    return [...this].map(([replicaId, held]) => ({ deploymentId: held.deploymentId, replicaId }));
  }

  /** Leaves every replica running and lets go of it (a graceful restart of a named host). */
  releaseAll(): void {
    for (const held of this.values()) held.release?.();
    this.clear();
  }
}
