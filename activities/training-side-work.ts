/**
 * What a trainer's events start while it runs: database writes in the order the events came, and
 * checkpoint uploads alongside. A failure is kept, not thrown into the event stream: it fails the
 * attempt when `settled()` is awaited, instead of surfacing as an unhandled rejection that would
 * take the whole worker process down mid-training. Writes after a failed one are skipped.
 */
export class TrainingSideWork {
  private chain: Promise<void> = Promise.resolve();
  private readonly alongsideWork: Array<Promise<void>> = [];
  private failed = false;
  private failure: unknown;

  private fail(err: unknown): void {
    if (this.failed) return;
    this.failed = true;
    this.failure = err;
  }

  inOrder(fn: () => Promise<unknown>): void {
    this.chain = this.chain
      .then(async () => {
        if (!this.failed) await fn();
      })
      .catch((err: unknown) => this.fail(err));
  }

  alongside(p: Promise<unknown>): void {
    this.alongsideWork.push(
      p.then(
        () => undefined,
        (err: unknown) => this.fail(err),
      ),
    );
  }

  /** Waits for the uploads (which queue writes of their own), then the writes; throws the first failure. */
  async settled(): Promise<void> {
    await Promise.all(this.alongsideWork);
    await this.chain;
    if (this.failed) throw this.failure;
  }
}
