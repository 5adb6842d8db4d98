/**
 * `./dev test`: brings up what the tests need, runs them, tears it down.
 *
 *   - a real Temporal dev server on free ports, history in memory
 *   - embedded PostgreSQL in a temporary directory (or a fresh database on
 *     DATABASE_URL's server, dropped afterwards)
 *   - the workflow bundle, built once and shared by every test file
 *
 * Then node's test runner runs test/**\/*.test.ts (or the files given as
 * arguments), one file at a time. Exits non-zero on any failure.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { bundleWorkflowCode } from '@temporalio/worker';
import { Connection } from '@temporalio/client';
import { ensureSearchAttributes } from '../common/temporal';
import { startEmbeddedPostgres } from '../db/embedded';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { freePort } from '../scripts/lib/ports';
import { ensureTemporalCli } from '../scripts/lib/temporal-cli';
import { startTemporalDevServer } from '../scripts/lib/temporal-dev-server';

const ROOT = path.resolve(__dirname, '..');
const say = (line: string) => process.stderr.write(`[test] ${line}\n`);

function findTests(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return findTests(full);
    return name.endsWith('.test.ts') ? [full] : [];
  });
}

async function provisionDatabase(work: string): Promise<{ url: string; teardown: () => Promise<void> }> {
  const external = process.env.DATABASE_URL;
  if (external) {
    // A throwaway database on the given server, so tests never touch real data.
    const name = `gantry_test_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: external });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(external);
    url.pathname = `/${name}`;
    return {
      url: url.toString(),
      teardown: async () => {
        const c = new pg.Client({ connectionString: external });
        await c.connect();
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await c.end();
      },
    };
  }
  const handle = await startEmbeddedPostgres({
    dir: path.join(work, 'postgres'),
    port: await freePort(),
    persistent: false,
  });
  return { url: handle.url, teardown: () => handle.stop() };
}

async function main() {
  const started = Date.now();
  const args = process.argv.slice(2);
  const files = args.length ? args.map((f) => path.resolve(f)) : findTests(path.join(ROOT, 'test')).sort();
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-test-'));
  const cleanups: Array<() => Promise<void>> = [];
  let exitCode = 1;
  try {
    const cli = await ensureTemporalCli({ configured: process.env.TEMPORAL_CLI, log: say });
    const temporalPort = await freePort();
    const [temporal, database] = await Promise.all([
      startTemporalDevServer({
        cli,
        port: temporalPort,
        headless: true,
        httpPort: await freePort(),
        metricsPort: await freePort(),
        log: () => undefined,
      }),
      provisionDatabase(work),
    ]);
    cleanups.push(() => temporal.stop(), database.teardown);
    say(`Temporal dev server ${temporal.address}; PostgreSQL ready`);

    const db = createPool(database.url);
    await migrate(db);
    await db.end();
    const connection = await Connection.connect({ address: temporal.address });
    await ensureSearchAttributes(connection, 'default');
    await connection.close();

    const bundlePath = path.join(work, 'workflow-bundle.js');
    const { code } = await bundleWorkflowCode({
      workflowsPath: require.resolve('../workflows'),
      logger: { trace() {}, debug() {}, info() {}, warn: say, error: say, log() {} },
    });
    writeFileSync(bundlePath, code);
    say(`ready in ${((Date.now() - started) / 1000).toFixed(1)}s; running ${files.length} test files`);

    exitCode = await new Promise<number>((resolve) => {
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', '--test', '--test-reporter=spec', '--test-concurrency=1', ...files],
        {
          cwd: ROOT,
          stdio: 'inherit',
          env: {
            ...process.env,
            NODE_ENV: 'test',
            DATABASE_URL: database.url,
            TEMPORAL_ADDRESS: temporal.address,
            TEMPORAL_NAMESPACE: 'default',
            TEMPORAL_CLI: cli,
            GANTRY_DATA_DIR: path.join(work, 'data'),
            GANTRY_SIGNING_SECRET: randomBytes(32).toString('hex'),
            GANTRY_WORKFLOW_BUNDLE: bundlePath,
            LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
          },
        },
      );
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    });
  } catch (err) {
    say(`could not run the tests: ${(err as Error).stack ?? err}`);
    exitCode = 1;
  } finally {
    for (const c of cleanups.reverse()) await c().catch((e) => say(`teardown: ${(e as Error).message}`));
    rmSync(work, { recursive: true, force: true });
  }
  say(`finished in ${((Date.now() - started) / 1000).toFixed(1)}s, exit ${exitCode}`);
  process.exit(exitCode);
}

void main();
