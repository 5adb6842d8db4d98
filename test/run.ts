/**
 * `./dev test`: brings up what the tests need, runs them, tears it down.
 *
 *   - a real Temporal dev server and PostgreSQL (scripts/lib/ephemeral-services.ts)
 *   - the workflow bundle, built once and shared by every test file
 *   - the classpath of Temporal's time-skipping test server (each workflow-tier file starts its own)
 *
 * Each is started only when a selected file's tier needs it (test/tiers.ts): a run of pure files
 * starts none of them. `--fast` selects the pure and workflow tiers, `--pure` the pure tier alone
 * (of the files named, or of all).
 *
 * Then it runs test/**\/*.test.ts (or the files given as arguments), each file in its own
 * node process (node's test runner in the file's own process, spec reporter),
 * GANTRY_TEST_CONCURRENCY (default 4) files at a time. A
 * `--test-name-pattern=<regexp>` argument is handed to each file's process: a narrowed run,
 * where the tests it leaves out are not counted as skipped (a file with none that matches fails). Files running at
 * the same time never share state: each lane has its own Temporal namespace (so its own task
 * queues and workers) and its own database, each file its own data directory, and a file ends
 * what it started before the next file of its lane begins. A file's output is printed in one
 * piece when it ends. Exits non-zero on any failure.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { TIERS, tierOf, type Tier } from './tiers';
import { NODE_TYPESCRIPT_ARGS } from '../platform/node-typescript';

const ROOT = path.resolve(__dirname, '..');
const say = (line: string) => process.stderr.write(`[test] ${line}\n`);
/** The counters node's spec reporter ends a run with (`ℹ pass 12`), summed over the files. */
const COUNTERS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;

/**
 * The files that take longest (a minute or more here) start first, so that no lane is left running
 * one of them alone at the end; the rest follow in name order.
 */
const LONGEST_FIRST = [
  'test/crash/whole-platform.test.ts', // about 150-200 s: ./dev up twice, a fine-tune to its end
  'test/deployments/podman-isolation.test.ts',
  'test/endpoints/podman-model-server.test.ts', // builds the model server image first on a fresh machine
  'test/workflows/cluster-flapping-node.test.ts', // about 33 s of CPU: days of a flapping node
  'test/workflows/cluster-outage-decisions.test.ts',
  'test/workflows/cluster-decisions.test.ts',
  'test/api/openapi-fuzz.test.ts',
  'test/audio/transcriptions.test.ts',
  'test/workflows/deployment-decisions.test.ts', // waits out a 15 s heartbeat timeout in real time
  'test/workflows/adapter-decisions.test.ts',
  'test/fine-tunes/fine-tune-recovery.test.ts',
  'test/compat/python-files-and-fine-tuning.test.ts',
  'test/trainers/reference-trainer.test.ts',
  'test/clusters/cluster-capacity.test.ts',
  'test/cli/cli.test.ts',
];

/**
 * Files that train or serve SmolLM2 with torch, which takes every core it finds: they run last,
 * one at a time and with nothing else running, as each was measured. Beside other files on a
 * 2-core machine they ran past their time limits, and some stalled (issue 41's note).
 */
const ALONE_AT_THE_END = new Set([
  'test/endpoints/podman-torch-model-server.test.ts',
  'test/endpoints/smollm2-fine-tunes-change-answers.test.ts',
  'test/fine-tunes/torch-trainer-jobs.test.ts',
  'test/fine-tunes/torch-trainer-recovery.test.ts',
  'test/endpoints/torch-model-server.test.ts',
]);

function findTests(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = path.join(dir, name);
    if (statSync(full).isDirectory()) return findTests(full);
    return name.endsWith('.test.ts') ? [full] : [];
  });
}

/**
 * The test files an argument names: a test file, or a folder's test files. Anything else stops the
 * run: a run that selected nothing would report a green suite.
 */
function testsNamedBy(arg: string): string[] {
  const full = path.resolve(arg);
  const found = existsSync(full) && statSync(full).isDirectory() ? findTests(full).sort() : [full];
  const notTests = found.filter((f) => !f.endsWith('.test.ts') || !existsSync(f));
  if (!found.length || notTests.length) {
    throw new Error(`${arg} names no test file (a *.test.ts file, or a folder that holds some)`);
  }
  return found;
}

interface FileResult {
  file: string;
  exitCode: number;
  seconds: number;
  /** CPU seconds of the file's process and of what it started and reaped (servers, workers, the JVM). */
  cpuSeconds: number;
  counts: Record<(typeof COUNTERS)[number], number>;
  /** Tests a --test-name-pattern left out (node reports them as skipped, with this reason). */
  filtered: number;
  /** What the file printed about its failures, repeated at the end of a run it failed (see failureReport). */
  failures: string;
}

/** Most of a failed file's report repeated at the end: CI keeps only the tail of a long log. */
const FAILURE_REPORT_CHARS = 8_000;

/**
 * The part of a file's output that says why it failed: node's spec reporter ends with a
 * "failing tests:" section, each failure with its error and stack; without one (a file killed,
 * or one that could not load) the last lines of the output.
 */
function failureReport(output: string): string {
  const at = output.lastIndexOf('✖ failing tests:');
  const report = at >= 0 ? output.slice(at) : output.split('\n').slice(-60).join('\n');
  return report.length > FAILURE_REPORT_CHARS ? `${report.slice(0, FAILURE_REPORT_CHARS)}\n[…]` : report;
}

/**
 * CPU seconds of this process's reaped children so far (cutime + cstime of /proc/self/stat, which
 * take in each child's own reaped children). Read as a file's process ends, the growth since the
 * last read is that file's CPU: the suite is bound by its total on two cores, so this is what to
 * cut. (Two files ending in the same instant would share one growth; it has not been seen.)
 */
function reapedChildrenCpuSeconds(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(fields[13]) + Number(fields[14])) / CLOCK_TICKS_PER_SECOND;
}
/** USER_HZ: what Linux counts /proc CPU times in, 100 on every architecture Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;
let reapedCpuSeen = 0;

/**
 * The longest a test file may run. A test over its own time limit fails, but a file can still
 * hang after it (an `after` hook waiting on work the timed-out test left running): such a file is
 * killed, with its process group, and fails, instead of holding the run until CI's own limit.
 */
const FILE_LIMIT_SECONDS = 20 * 60;

/**
 * The environment variable each file's process carries, with a value of that file's own; every
 * process it starts with the environment it has inherits it, whatever process group or session it
 * moves to (a platform under test runs in its own group, so killing the file's group leaves it
 * running).
 */
const FILE_MARK = 'GANTRY_TEST_FILE_MARK';

/**
 * The processes still running that a file started: those with its mark in their environment
 * (/proc/<pid>/environ: the environment they started with), and their descendants. Podman, the
 * trainers and replicas start with an environment of their own, without the mark: they are found
 * as descendants of the platform process that started them while it runs. A process whose parent
 * has gone (a container's conmon, which detaches on purpose) is not found.
 */
function processesLeftBy(mark: string): Array<{ pid: number; command: string }> {
  const parentOf = new Map<number, number>();
  const marked = new Set<number>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const pid = Number(name);
      // The fields after the command name, which may itself hold spaces and parentheses.
      parentOf.set(pid, Number(readFileSync(`/proc/${name}/stat`, 'latin1').split(') ').at(-1)!.split(' ')[1]));
      if (readFileSync(`/proc/${name}/environ`, 'latin1').split('\0').includes(`${FILE_MARK}=${mark}`)) marked.add(pid);
    } catch {
      // It ended meanwhile, or it is not ours to read.
    }
  }
  const left = (pid: number): boolean => {
    for (let p: number | undefined = pid; p && p > 1; p = parentOf.get(p)) if (marked.has(p)) return true;
    return false;
  };
  const found: Array<{ pid: number; command: string }> = [];
  for (const pid of parentOf.keys()) {
    if (!left(pid)) continue;
    try {
      const command = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
      found.push({ pid, command: command.slice(0, 160) });
    } catch {
      // It ended meanwhile.
    }
  }
  return found;
}

/**
 * Ends what a file left running once it has ended (a file that timed out never reached its
 * teardown, and its platform ran on beside the files after it), and says so.
 */
function endLeftovers(file: string, mark: string): void {
  const left = processesLeftBy(mark);
  for (const p of left) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // it ended meanwhile
    }
  }
  if (left.length) {
    say(
      `${path.relative(ROOT, file)} left ${left.length} process(es) running after it ended; killed: ` +
        left.map((p) => `${p.pid} ${p.command}`).join('; '),
    );
  }
}

/** The files' process groups still running: a Ctrl-C (or CI's SIGTERM) of the run ends them too. */
const runningGroups = new Set<number>();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const pid of runningGroups) killGroup(pid);
    process.kill(process.pid, signal);
  });
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // it ended meanwhile
  }
}

/** Runs one test file in its own process with `env`; prints its output in one piece when it ends. */
function runFile(file: string, env: NodeJS.ProcessEnv, nodeTestArgs: string[]): Promise<FileResult> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      // The file itself, not `node --test <file>`: that starts a second node (and tsx) per file to
      // run the file in, 0.2 s of CPU each (a quarter of a small file's). Each test's own `timeout`
      // applies as before; FILE_LIMIT_SECONDS bounds the file.
      [...NODE_TYPESCRIPT_ARGS, '--test-reporter=spec', ...nodeTestArgs, file],
      // Its own process group, so the limit below ends what it started too.
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env, detached: true },
    );
    const chunks: Buffer[] = [];
    runningGroups.add(child.pid!);
    const limit = setTimeout(() => {
      chunks.push(Buffer.from(`\n[test] killed: the file ran past ${FILE_LIMIT_SECONDS} s\n`));
      killGroup(child.pid!);
    }, FILE_LIMIT_SECONDS * 1000);
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => chunks.push(c));
    child.on('close', (code, signal) => {
      clearTimeout(limit);
      runningGroups.delete(child.pid!);
      const output = Buffer.concat(chunks).toString('utf8');
      const seconds = (Date.now() - started) / 1000;
      const counts = Object.fromEntries(
        COUNTERS.map((k) => [k, Number(new RegExp(`^ℹ ${k} (\\d+)$`, 'm').exec(output)?.[1] ?? 0)]),
      ) as FileResult['counts'];
      const exitCode = code ?? (signal ? 1 : 0);
      const reapedCpu = reapedChildrenCpuSeconds();
      const cpuSeconds = reapedCpu - reapedCpuSeen;
      reapedCpuSeen = reapedCpu;
      process.stdout.write(
        `\n[test] ${path.relative(ROOT, file)}: ${seconds.toFixed(1)}s, cpu ${cpuSeconds.toFixed(1)}s, exit ${exitCode}\n${output}`,
      );
      const filtered = output.match(/# test name does not match pattern$/gm)?.length ?? 0;
      resolve({
        file,
        exitCode,
        seconds,
        cpuSeconds,
        counts,
        filtered,
        failures: failureReport(output),
      });
    });
  });
}

/**
 * Why a file failed, or undefined when it passed. A skipped or unfinished test is not a passing
 * one, and a file that ran no test proves nothing: either fails the run, as a failing test does (a
 * test a --test-name-pattern left out is neither: it was not asked for). A failed test fails it
 * whatever the exit code says (a test that sets process.exitCode can hide it).
 */
function whyFailed(r: FileResult): string | undefined {
  if (r.exitCode !== 0) return `exit ${r.exitCode}`;
  if (r.counts.fail > 0 || r.counts.cancelled > 0) return `${r.counts.fail} failed, ${r.counts.cancelled} cancelled`;
  if (r.counts.tests - r.filtered === 0) return r.filtered ? 'no test matches the pattern' : 'it declares no test';
  if (r.counts.skipped - r.filtered > 0 || r.counts.todo > 0) {
    return `${r.counts.skipped - r.filtered} skipped, ${r.counts.todo} todo`;
  }
  return undefined;
}

/** The environment a tier's files get from the run (beyond what every file gets), and nothing more. */
type TierEnv = Record<Tier, NodeJS.ProcessEnv>;

/** Service settings a file outside the platform tier must not find, even when the caller's shell has them. */
const PLATFORM_ONLY = ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'TEMPORAL_CLI'];

async function main() {
  const started = Date.now();
  const args = process.argv.slice(2);
  // --fast: the pure and workflow tiers; --pure: the pure tier alone (of the files named, or of all).
  const upTo: Tier = args.includes('--pure') ? 'pure' : args.includes('--fast') ? 'workflow' : 'platform';
  const nodeTestArgs = args.filter((a) => a.startsWith('--test-name-pattern='));
  const named = args.filter((a) => a !== '--fast' && a !== '--pure' && !nodeTestArgs.includes(a));
  let files: string[];
  try {
    files = named.length ? named.flatMap(testsNamedBy) : findTests(path.join(ROOT, 'test')).sort();
  } catch (err) {
    say((err as Error).message);
    process.exit(2);
  }
  const tiers = new Map(files.map((f) => [f, tierOf(f).tier]));
  files = files.filter((f) => TIERS.indexOf(tiers.get(f)!) <= TIERS.indexOf(upTo));
  const count = (t: Tier) => files.filter((f) => tiers.get(f) === t).length;
  say(`${files.length} test files: ${TIERS.map((t) => `${count(t)} ${t}`).join(', ')}`);
  if (!files.length) {
    say(
      `no test file selected: --${upTo === 'pure' ? 'pure' : 'fast'} keeps only files of the ${TIERS.slice(0, TIERS.indexOf(upTo) + 1).join(' and ')} tiers`,
    );
    process.exit(2);
  }
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-test-'));
  const cleanups: Array<() => Promise<void>> = [];
  let exitCode = 1;
  try {
    // Four lanes on two cores: a test file spends much of its time waiting (on timers, Temporal,
    // child processes). With two lanes the machine sat 40% idle (631 s against 544 s here); with
    // three, 607-645 s on a slower evening, when four took 526-528 s with the cores 6% idle.
    const lanes = Math.max(1, Math.min(files.length, Number(process.env.GANTRY_TEST_CONCURRENCY) || 4));
    const tierEnv: TierEnv = { pure: {}, workflow: {}, platform: {} };
    // Without platform files, a lane is only a place to run one file at a time.
    let laneServices: Array<{ namespace?: string; databaseUrl?: string }> = Array.from({ length: lanes }, () => ({}));
    // The services' modules are loaded only by a run that needs them: with the Temporal SDK and
    // its clients they were about a second of CPU, twice what a pure file takes.
    if (count('platform')) {
      const { startEphemeralServices } =
        require('../scripts/lib/ephemeral-services') as typeof import('../scripts/lib/ephemeral-services');
      const services = await startEphemeralServices(work, say, { lanes });
      cleanups.push(services.stop);
      say(`Temporal dev server ${services.temporalAddress}; PostgreSQL ready`);
      laneServices = services.lanes;
      Object.assign(tierEnv.platform, {
        TEMPORAL_ADDRESS: services.temporalAddress,
        TEMPORAL_CLI: services.temporalCli,
      });
    }
    if (count('workflow') || count('platform')) {
      // Each tier has what the tiers below it have: the workflow tier's time-skipping server
      // (resolved once here, started by each file) and the workflow bundle.
      const { CLASSPATH_ENV, ensureWorkflowTestServer } =
        require('../scripts/lib/workflow-test-server') as typeof import('../scripts/lib/workflow-test-server');
      const { writeWorkflowBundle } = require('../workers/workflow-code') as typeof import('../workers/workflow-code');
      const classpath = await ensureWorkflowTestServer(say);
      const bundlePath = path.join(work, 'workflow-bundle.js');
      await writeWorkflowBundle(bundlePath, say);
      for (const tier of ['workflow', 'platform'] as const) {
        Object.assign(tierEnv[tier], { GANTRY_WORKFLOW_BUNDLE: bundlePath, [CLASSPATH_ENV]: classpath });
      }
    }
    say(
      `ready in ${((Date.now() - started) / 1000).toFixed(1)}s; running ${files.length} test files, ${lanes} at a time`,
    );

    const base: NodeJS.ProcessEnv = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !PLATFORM_ONLY.includes(k))),
      NODE_ENV: 'test',
      GANTRY_SIGNING_SECRET: randomBytes(32).toString('hex'),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
    };
    const rank = (f: string) => {
      const i = LONGEST_FIRST.indexOf(path.relative(ROOT, f));
      return i < 0 ? LONGEST_FIRST.length : i;
    };
    const queue = [...files].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const results: FileResult[] = [];
    let filesStarted = 0;
    reapedCpuSeen = reapedChildrenCpuSeconds(); // Maven, javac and the like, before any file
    const alone = queue.filter((f) => ALONE_AT_THE_END.has(path.relative(ROOT, f)));
    const together = queue.filter((f) => !alone.includes(f));
    const runIn = async (lane: (typeof laneServices)[number], file: string) => {
      // A data directory of the file's own: what one file leaves on disk is never another's.
      const n = ++filesStarted;
      const dataDir = path.join(work, `data-${n}`);
      mkdirSync(dataDir, { recursive: true });
      // Each file finds only its tier's services, in every run: one whose tier test/tiers.ts
      // misjudged fails here too, not only when run on its own.
      const tier = tiers.get(file)!;
      const laneEnv = tier === 'platform' ? { DATABASE_URL: lane.databaseUrl, TEMPORAL_NAMESPACE: lane.namespace } : {};
      const mark = `${process.pid}-${n}`;
      const env = { ...base, ...tierEnv[tier], ...laneEnv, GANTRY_DATA_DIR: dataDir, [FILE_MARK]: mark };
      results.push(await runFile(file, env, nodeTestArgs));
      endLeftovers(file, mark);
      rmSync(dataDir, { recursive: true, force: true });
    };
    await Promise.all(
      laneServices.map(async (lane) => {
        for (let file = together.shift(); file; file = together.shift()) await runIn(lane, file);
      }),
    );
    for (const file of alone) await runIn(laneServices[0], file);
    const total = Object.fromEntries(
      COUNTERS.map((k) => [k, results.reduce((sum, r) => sum + r.counts[k], 0)]),
    ) as FileResult['counts'];
    const failed = results.filter((r) => whyFailed(r) !== undefined);
    say(`${results.length} files; ${COUNTERS.map((k) => `${k} ${total[k]}`).join(', ')}`);
    const byCpu = [...results].sort((a, b) => b.cpuSeconds - a.cpuSeconds);
    say(
      `the files' CPU: ${results.reduce((sum, r) => sum + r.cpuSeconds, 0).toFixed(0)}s, most in ` +
        byCpu
          .slice(0, 8)
          .map((r) => `${path.relative(ROOT, r.file)} ${r.cpuSeconds.toFixed(0)}s`)
          .join(', '),
    );
    for (const r of failed) {
      say(`failed: ${path.relative(ROOT, r.file)} (${whyFailed(r)})`);
      if (r.failures) process.stdout.write(`${r.failures.trimEnd()}\n`);
    }
    exitCode = failed.length === 0 && results.length === files.length ? 0 : 1;
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
