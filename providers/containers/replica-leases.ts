/**
 * Who watches each replica on this container host, and what happens to one
 * nobody watches. A replica is supervised by a long-running activity of its
 * deployment's workflow run. When that activity detaches without being asked
 * to stop the replica (its run continued as new, or the workflow ended, or the
 * server timed the activity out while this host was blocked), the replica keeps
 * running for a lease: the next run, or the same run re-attaching, supervises
 * it again within seconds. A replica nobody re-attaches to before the lease
 * ends is stopped, so no replica runs (and is metered) unowned.
 */
export class ReplicaLeases {
  private readonly watchers = new Map<string, number>();
  private readonly expiries = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly leaseMs: number,
    /** An expiry that failed (the replica could not be stopped or recorded): said, never thrown. */
    private readonly onError: (replicaId: string, err: unknown) => void,
  ) {}

  /** A supervisor starts watching the replica: any pending expiry is called off. */
  attach(replicaId: string): void {
    clearTimeout(this.expiries.get(replicaId));
    this.expiries.delete(replicaId);
    this.watchers.set(replicaId, (this.watchers.get(replicaId) ?? 0) + 1);
  }

  /** A supervisor ended with the replica's end (it exited, or it was stopped on request). */
  end(replicaId: string): void {
    this.drop(replicaId);
  }

  /**
   * A supervisor left a running replica behind. When it was the last one watching, `expire`
   * runs after the lease unless another supervisor attaches first.
   */
  detach(replicaId: string, expire: () => Promise<void>): void {
    if (this.drop(replicaId) > 0) return;
    const timer = setTimeout(() => {
      this.expiries.delete(replicaId);
      expire().catch((err) => this.onError(replicaId, err));
    }, this.leaseMs);
    timer.unref();
    this.expiries.set(replicaId, timer);
  }

  /** Replicas left behind whose lease is running. */
  get unwatched(): string[] {
    return [...this.expiries.keys()];
  }

  private drop(replicaId: string): number {
    const left = (this.watchers.get(replicaId) ?? 1) - 1;
    if (left > 0) this.watchers.set(replicaId, left);
    else this.watchers.delete(replicaId);
    return left;
  }
}
