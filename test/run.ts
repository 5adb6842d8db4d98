/**
 * `./dev test`: brings up what the tests need, runs them, tears it down.
 *
 *   - a real Temporal dev server and PostgreSQL (scripts/lib/ephemeral-services.ts)
 *   - the workflow bundle, built once and shared by every test file
 *
 * Then node's test runner runs test/**\/*.test.ts (or the files given as
 * arguments), one file at a time. Exits non-zero on any failure.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEphemeralServices } from '../scripts/lib/ephemeral-services';
import { CLASSPATH_ENV, ensureWorkflowTestServer } from '../scripts/lib/workflow-test-server';
import { writeWorkflowBundle } from '../workers/runtime';

const ROOT = path.resolve(__dirname, '..');
const say = (line: string) => process.stderr.write(`[test] ${line}\n`);

function findTests(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return findTests(full);
    return name.endsWith('.test.ts') ? [full] : [];
  });
}

async function main() {
  const started = Date.now();
  const args = process.argv.slice(2);
  const files = args.length ? args.map((f) => path.resolve(f)) : findTests(path.join(ROOT, 'test')).sort();
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-test-'));
  const cleanups: Array<() => Promise<void>> = [];
  let exitCode = 1;
  try {
    const services = await startEphemeralServices(work, say);
    cleanups.push(services.stop);
    say(`Temporal dev server ${services.temporalAddress}; PostgreSQL ready`);

    // The workflow test tier's time-skipping server (test/workflows/).
    const workflowTestServerClasspath = await ensureWorkflowTestServer(say);

    const bundlePath = path.join(work, 'workflow-bundle.js');
    await writeWorkflowBundle(bundlePath, say);
    say(`ready in ${((Date.now() - started) / 1000).toFixed(1)}s; running ${files.length} test files`);

    exitCode = await new Promise<number>((resolve) => {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          '--test',
          '--test-reporter=spec',
          '--test-concurrency=1',
          '--test-timeout=300000',
          ...files,
        ],
        {
          cwd: ROOT,
          stdio: 'inherit',
          env: {
            ...process.env,
            NODE_ENV: 'test',
            DATABASE_URL: services.databaseUrl,
            TEMPORAL_ADDRESS: services.temporalAddress,
            TEMPORAL_NAMESPACE: 'default',
            TEMPORAL_CLI: services.temporalCli,
            GANTRY_DATA_DIR: path.join(work, 'data'),
            GANTRY_SIGNING_SECRET: randomBytes(32).toString('hex'),
            GANTRY_WORKFLOW_BUNDLE: bundlePath,
            [CLASSPATH_ENV]: workflowTestServerClasspath,
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
