/**
 * A process's own periodic chores (a container host's disk keeping, the control worker's blob
 * deletions): local, idempotent rounds where a lost round loses nothing, so a timer rather than a
 * workflow. Never two rounds of one chore at once: a tick while a round runs is skipped.
 */
export interface Repeating {
  /** Stops the timer, waiting for a round under way. */
  stop(): Promise<void>;
}

/** Runs `round` every `everyMs` without holding the process open. */
export function repeat(round: () => Promise<void>, everyMs: number, onError: (err: Error) => void): Repeating {
  let current: Promise<void> | undefined;
  const timer = setInterval(() => {
    current ??= round()
      .catch(onError)
      .finally(() => (current = undefined));
  }, everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await current;
    },
  };
}
