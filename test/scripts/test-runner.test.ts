/**
 * The test runner (test/run.ts) fails a run that proves less than it reports: a skipped or todo
 * test, a file that declares no test, or a failing test its process's exit code hides, fails it
 * as a failing test does. Probe files of each kind
 * are written to a temporary folder and run through the runner itself; a passing probe shows the
 * failures come from what each probe is.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { NODE_TYPESCRIPT_ARGS } from '../../platform/node-typescript';

const RUNNER = path.join(__dirname, '..', 'run.ts');
const dir = mkdtempSync(path.join(tmpdir(), 'gantry-runner-probes-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const PROBES = {
  passing: "test('passes', () => {});",
  skipped: "test('passes', () => {});\ntest('is skipped', { skip: true }, () => {});",
  todo: "test('passes', () => {});\ntest('is to do', { todo: true }, () => {});",
  empty: '// declares no test',
  'one-fails': "test('passes', () => {});\ntest('fails', () => { throw new Error('it broke'); });",
  'none-matches': "test('is named otherwise', () => {});",
  // Starts a shell in a session of its own (as a platform under test runs), which starts a sleep
  // with an environment of its own (as podman and the trainers are started), and ends without
  // stopping either; the sleep's pid goes where the test reads it.
  'leaves-a-process': `import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
const started = () => {
  try {
    return readFileSync(process.env.PROBE_PID_FILE!, 'utf8');
  } catch {
    return '';
  }
};
test('passes', async () => {
  const script = 'env -i sleep 601 & echo $! > "$PROBE_PID_FILE.tmp"; mv "$PROBE_PID_FILE.tmp" "$PROBE_PID_FILE"; wait';
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
  // Ends once the sleep runs: what the runner then finds is there by construction.
  while (!started()) await new Promise((r) => setTimeout(r, 10));
});`,
  // Its process exits 0 all the same: its failure is known from what it reported.
  'hides-failure':
    "process.on('exit', () => { process.exitCode = 0; });\ntest('fails', () => { throw new Error('it broke'); });",
};
const probe = (name: keyof typeof PROBES) => {
  const file = path.join(dir, `${name}.test.ts`);
  writeFileSync(file, `import { test } from 'node:test';\n${PROBES[name]}\n`);
  return file;
};

function runTests(args: string[], extraEnv: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stderr: string }> {
  // Without the NODE_TEST_CONTEXT node's runner sets when this file runs under `node --test`: with
  // it, the probes would report to that runner instead of printing the counts test/run.ts reads.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [...NODE_TYPESCRIPT_ARGS, RUNNER, ...args],
      { env: { ...env, ...extraEnv, GANTRY_TEST_CONCURRENCY: '2' } },
      (_err, _stdout, stderr) => resolve({ code: child.exitCode, stderr }),
    );
  });
}

/** The probes the runner's summary names as failed, with its reason for each. */
const failedIn = (stderr: string) =>
  [...stderr.matchAll(/^\[test\] failed: .*\/([\w-]+)\.test\.ts \((.*)\)$/gm)].map(
    ([, name, why]) => `${name}: ${why}`,
  );

test('a skipped test, a todo test and a file that declares no test each fail the run; a passing file does not', async () => {
  const { code, stderr } = await runTests([probe('passing'), probe('skipped'), probe('todo'), probe('empty')]);
  assert.deepEqual(failedIn(stderr).sort(), [
    'empty: it declares no test',
    'skipped: 1 skipped, 0 todo',
    'todo: 0 skipped, 1 todo',
  ]);
  assert.equal(code, 1);
});

test('a file whose failing test its process exit code hides still fails the run', async () => {
  const { code, stderr } = await runTests([probe('passing'), probe('hides-failure')]);
  assert.deepEqual(failedIn(stderr), ['hides-failure: 1 failed, 0 cancelled']);
  assert.equal(code, 1);
});

test('what a file left running after it ended is killed, and the run says so', async () => {
  const pidFile = path.join(dir, 'left.pid');
  const { code, stderr } = await runTests([probe('leaves-a-process')], { PROBE_PID_FILE: pidFile });
  const sleep = Number(readFileSync(pidFile, 'utf8'));
  const said = /leaves-a-process\.test\.ts left (\d+) process\(es\) running after it ended; killed: (.*)$/m.exec(
    stderr,
  );
  assert.ok(said, stderr);
  assert.equal(said[1], '2', 'the shell, and the sleep it started without the mark');
  assert.match(said[2], new RegExp(`\\b${sleep} sleep 601\\b`));
  assert.match(said[2], /\d+ sh -c env -i sleep 601/);
  // Killed: gone, or a zombie its new parent has yet to reap.
  const state = existsSync(`/proc/${sleep}/stat`)
    ? readFileSync(`/proc/${sleep}/stat`, 'utf8').split(') ')[1]?.[0]
    : 'gone';
  assert.ok(state === 'gone' || state === 'Z', `the sleep left behind is ${state}`);
  assert.equal(code, 0, 'reported, not failed: the file passed');
});

test('a narrowed run (--test-name-pattern) does not count the tests it leaves out as skipped; a file with none that matches fails', async () => {
  const { code, stderr } = await runTests(['--test-name-pattern=^passes$', probe('one-fails'), probe('none-matches')]);
  assert.deepEqual(failedIn(stderr), ['none-matches: no test matches the pattern']);
  assert.equal(code, 1);
});
