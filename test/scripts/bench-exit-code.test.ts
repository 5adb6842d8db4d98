/**
 * A bench that misses a target exits 1, so `./dev bench` (bench/all.ts) and anyone scripting a
 * bench see the regression. Every bench starts the embedded PostgreSQL, whose exit hook used to end
 * the process with 0 whatever the bench had set (see bench/lib/platform.ts runBench).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { NODE_TYPESCRIPT_ARGS } from '../../platform/node-typescript';

const FIXTURE = path.join(__dirname, 'fixtures', 'bench-with-one-check.ts');
const dir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-exit-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function runFixture(met: boolean): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [...NODE_TYPESCRIPT_ARGS, FIXTURE, path.join(dir, met ? 'pg-met' : 'pg-missed')],
      { env: { ...process.env, BENCH_FIXTURE_MET: met ? '1' : '0' } },
      (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
    );
  });
}

test('a bench whose median misses its target exits 1, and still prints its result', async () => {
  const { code, stdout, stderr } = await runFixture(false);
  assert.match(stderr, /MISSED x, Gantry \/ reference: 0\.4 \(0\.4–0\.4\), target ≥ 0\.5/);
  assert.equal(JSON.parse(stdout.trim().split('\n').at(-1)!).checks[0].met, false);
  assert.equal(code, 1);
});

test('a bench that meets every target exits 0', async () => {
  const { code, stderr } = await runFixture(true);
  assert.match(stderr, /met {4}x, Gantry \/ reference/);
  assert.equal(code, 0);
});
