/** Start-up retries, graceful shutdown and file modes shared by every Gantry process. */
import type { Logger } from './logger';

/**
 * Files and directories this process (and what it starts) creates are its user's only: 0600 and
 * 0700. Blobs, volumes, replica logs, speech files and the data directory's secrets hold tenants'
 * data and keys; nothing else on the machine needs to read them. Called first by every entry point.
 */
export function ownerOnlyFiles(): void {
  process.umask(0o077);
}

export async function retryUntilReady<T>(
  what: string,
  fn: () => Promise<T>,
  logger: Logger,
  { timeoutMs = 60_000, intervalMs = 500 } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`${what} not reachable after ${timeoutMs / 1000}s: ${(err as Error).message}`);
      }
      if (attempt === 1 || attempt % 10 === 0) {
        logger.warn({ err: (err as Error).message }, `waiting for ${what}`);
      }
      await new Promise((r) => setTimeout(r, Math.min(intervalMs * attempt, 5_000)));
    }
  }
}

/**
 * Runs `stop` once on SIGINT/SIGTERM, then exits. A second signal exits at once.
 */
export function onShutdownSignal(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    stop().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}

/** Fatal start-up errors: one clear line, non-zero exit. */
export function exitOnStartupError(logger: Logger) {
  return (err: unknown) => {
    logger.fatal({ err }, `failed to start: ${(err as Error).message}`);
    process.exit(1);
  };
}
