/**
 * Batch and evaluation calls share the gateway with interactive ones without starving them:
 *
 * - per project, at most `perProject` work calls are in flight in this gateway; more wait their
 *   turn (first come, first served), so one batch of 100,000 lines is a steady stream, not a flood;
 * - interactive first: a work call bound for a replica set (a deployment, a serverless pool) that
 *   has interactive calls in flight waits until it has none, up to `yieldMs`, then goes anyway (so
 *   a constantly busy endpoint still makes progress on its batches, at least one call per wait).
 *
 * Interactive calls never wait here; they only say when they start and end.
 */
export class WorkTraffic {
  private readonly interactive = new Map<string, number>();
  private readonly quiet = new Map<string, Array<() => void>>();
  private readonly running = new Map<string, number>();
  private readonly queued = new Map<string, Array<() => void>>();

  constructor(private readonly opts: { perProject: number; yieldMs: number }) {}

  /** An interactive call to `target` starts; the answer ends it. */
  interactiveCall(target: string): () => void {
    this.interactive.set(target, (this.interactive.get(target) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const left = (this.interactive.get(target) ?? 1) - 1;
      if (left > 0) return void this.interactive.set(target, left);
      this.interactive.delete(target);
      for (const wake of this.quiet.get(target) ?? []) wake();
      this.quiet.delete(target);
    };
  }

  /** Waits for the project's turn and for `target` to be free of interactive calls; the answer ends the call. */
  async workCall(projectId: string, target: string): Promise<() => void> {
    await this.turn(projectId);
    if (this.interactive.get(target)) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.opts.yieldMs);
        const waiting = this.quiet.get(target) ?? [];
        waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
        this.quiet.set(target, waiting);
      });
    }
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const next = this.queued.get(projectId)?.shift();
      if (next) return next(); // the slot passes to the next waiting call
      if (this.queued.get(projectId)?.length === 0) this.queued.delete(projectId);
      const left = (this.running.get(projectId) ?? 1) - 1;
      if (left > 0) this.running.set(projectId, left);
      else this.running.delete(projectId);
    };
  }

  private turn(projectId: string): Promise<void> {
    const running = this.running.get(projectId) ?? 0;
    if (running < this.opts.perProject) {
      this.running.set(projectId, running + 1);
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const waiting = this.queued.get(projectId) ?? [];
      waiting.push(resolve);
      this.queued.set(projectId, waiting);
    });
  }
}
