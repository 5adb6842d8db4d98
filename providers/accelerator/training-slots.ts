/**
 * How many trainers one GPU host runs at once (GANTRY_TRAINING_SLOTS). A
 * training task beyond them waits for a slot on the host that took it:
 * cancellable (a cancelled job leaves the wait at once) and heartbeating while
 * it waits (so it is not presumed lost). The worker takes only a few tasks
 * more than it has slots (maxConcurrentActivityTaskExecutions), so the rest
 * stay in the task queue for other hosts.
 */
export class TrainingSlots {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {
    this.free = size;
  }

  /** Resolves with the slot's release once one is free; rejects with the signal's reason if aborted first. */
  async take(signal: AbortSignal, whileWaiting: () => void): Promise<() => void> {
    if (this.free > 0) {
      this.free--;
      return this.releaser();
    }
    const beat = setInterval(whileWaiting, 1000);
    try {
      await new Promise<void>((resolve, reject) => {
        const turn = () => {
          signal.removeEventListener('abort', abandon);
          resolve();
        };
        const abandon = () => {
          this.waiting.splice(this.waiting.indexOf(turn), 1);
          reject(signal.reason);
        };
        if (signal.aborted) return reject(signal.reason);
        signal.addEventListener('abort', abandon, { once: true });
        this.waiting.push(turn);
      });
    } finally {
      clearInterval(beat);
    }
    return this.releaser(); // the slot was handed over by the one released
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    };
  }
}
