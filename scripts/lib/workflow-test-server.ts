/**
 * Temporal's time-skipping test server for the workflow test tier.
 *
 * The Node SDK would download a native build of this server from outside the
 * package registries, which this project's machines cannot reach. The same
 * server is published on Maven Central (io.temporal:temporal-test-server), so
 * it is resolved here with Maven from test/workflow-server/pom.xml, once per
 * pom and set of patches (the classpath is cached under ~/.cache/gantry), and
 * run on the JVM by test/workflow-server/test-server.sh. Without a JDK or
 * Maven it stops and says what to install; nothing stands in for the server.
 *
 * test/workflow-server/patches/ holds fixes to the server's own bugs that its
 * latest release still has, as unified diffs against its published sources
 * (each patch says which upstream issue it answers). They are applied to the
 * sources Maven fetches, compiled with javac, and put ahead of the server's jar
 * on the classpath. A patch that no longer applies (the pom's version moved)
 * stops the resolution and says so, rather than running the server unpatched.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { applyPatch, parsePatch } from 'diff';
import { freePort, isPortFree } from '../../platform/ports';

const DIR = path.resolve(__dirname, '..', '..', 'test', 'workflow-server');
const POM = path.join(DIR, 'pom.xml');
const PATCHES = path.join(DIR, 'patches');
/** The executable handed to TestWorkflowEnvironment.createTimeSkipping as an existing path. */
export const WORKFLOW_TEST_SERVER = path.join(DIR, 'test-server.sh');
/** The environment variable test-server.sh reads the classpath file from. */
export const CLASSPATH_ENV = 'GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH';
/** The class data archive, beside the classpath file (the name test-server.sh looks for). */
const ARCHIVE = 'classes.jsa';

/** Runs `cmd`; with `quiet`, what it writes to stderr is shown only if it fails (javac's notes on upstream code are not ours to act on). */
function run(cmd: string, args: string[], { quiet = false } = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', quiet ? 'pipe' : 'inherit'] });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', (err) =>
      reject(
        new Error(
          `${cmd} is needed for the workflow tests' time-skipping server and could not be run (${err.message}). ` +
            'Install a JDK (17 or later) and Maven (Debian: apt-get install default-jdk-headless maven).',
        ),
      ),
    );
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}\n${stderr}`.trimEnd())),
    );
  });
}

function patchFiles(): string[] {
  return readdirSync(PATCHES)
    .filter((name) => name.endsWith('.patch'))
    .sort()
    .map((name) => path.join(PATCHES, name));
}

/**
 * Resolves the server's classpath (first run: Maven downloads about 30 MB, javac compiles the
 * patched classes, and the class archive is written) and returns the file that holds it.
 */
export async function ensureWorkflowTestServer(log: (line: string) => void): Promise<string> {
  // The pom, the patches and this code that builds from them: a change to any is a new resolution.
  const hash = createHash('sha256').update(readFileSync(POM)).update(readFileSync(__filename));
  for (const file of patchFiles()) hash.update(file).update(readFileSync(file));
  const base = process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache');
  const cacheDir = path.join(base, 'gantry', `workflow-test-server-${hash.digest('hex').slice(0, 12)}`);
  const classpath = path.join(cacheDir, 'classpath.txt');
  if (existsSync(classpath)) {
    const entries = readFileSync(classpath, 'utf8').trim().split(':');
    if (entries.every((entry) => existsSync(entry))) return classpath;
  }
  rmSync(cacheDir, { recursive: true, force: true });
  mkdirSync(cacheDir, { recursive: true });
  log('Resolving Temporal time-skipping test server from Maven Central (first run only)...');
  const jarsFile = path.join(cacheDir, 'jars.txt');
  await run('mvn', ['-q', '-B', '-f', POM, 'dependency:build-classpath', `-Dmdep.outputFile=${jarsFile}`]);
  const jars = readFileSync(jarsFile, 'utf8').trim();
  const patched = await compilePatchedClasses(cacheDir, jars);
  // Written last and renamed into place, so an interrupted resolution is never taken for a cached one.
  writeFileSync(`${classpath}.tmp`, `${patched}:${jars}`);
  await writeClassArchive(`${classpath}.tmp`, log);
  renameSync(`${classpath}.tmp`, classpath);
  return classpath;
}

/**
 * Class data sharing for the server: the classes it loads to start, parsed and verified once into
 * `classes.jsa` beside the classpath file, which test-server.sh maps when it is there. Every file of
 * the workflow tier starts a JVM: this takes each start from about 1.0 s of CPU to 0.4 s. The JVM
 * writes the archive as it exits, so the server is started, and stopped once it listens. Speed
 * only: without the archive (a JVM that cannot write one) the server starts as before.
 */
async function writeClassArchive(classpathFile: string, log: (line: string) => void): Promise<void> {
  const port = await freePort();
  const server = spawn(WORKFLOW_TEST_SERVER, [String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, [CLASSPATH_ENV]: classpathFile, GANTRY_WORKFLOW_TEST_SERVER_WRITE_ARCHIVE: '1' },
  });
  let stderr = '';
  server.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let ended = false;
  const exited = new Promise<void>((resolve) => server.on('exit', () => resolve()));
  void exited.then(() => (ended = true));
  // A server that never listens is stopped too (after a minute; it takes seconds): the archive is
  // only a speed-up, and the resolution goes on without it.
  const deadline = Date.now() + 60_000;
  while (!ended && Date.now() < deadline && (await isPortFree(port))) await new Promise((r) => setTimeout(r, 100));
  if (!ended) server.kill('SIGTERM');
  await exited;
  if (!existsSync(path.join(path.dirname(classpathFile), ARCHIVE))) {
    log(`The workflow test server's class archive was not written; it starts without one.\n${stderr}`.trimEnd());
  }
}

/**
 * Applies test/workflow-server/patches to the server's sources and compiles what they touch; returns
 * them as a jar (class data sharing takes no folder on the classpath).
 */
async function compilePatchedClasses(cacheDir: string, jars: string): Promise<string> {
  const sources = path.join(cacheDir, 'sources');
  const classes = path.join(cacheDir, 'patched-classes');
  await run('mvn', [
    '-q',
    '-B',
    '-f',
    POM,
    'dependency:unpack-dependencies',
    '-Dclassifier=sources',
    '-DincludeArtifactIds=temporal-test-server',
    `-DoutputDirectory=${sources}`,
    // Its record of what it unpacked goes with the sources (not into test/workflow-server/target),
    // so a cache that was removed is unpacked again.
    `-DmarkersDirectory=${path.join(cacheDir, 'unpack-markers')}`,
  ]);
  const touched: string[] = [];
  for (const patchFile of patchFiles()) {
    for (const fileDiff of parsePatch(readFileSync(patchFile, 'utf8'))) {
      const relative = (fileDiff.newFileName ?? '').replace(/^b\//, '');
      const target = path.join(sources, relative);
      const result = existsSync(target) ? applyPatch(readFileSync(target, 'utf8'), fileDiff) : false;
      if (result === false) {
        throw new Error(
          `${path.relative(process.cwd(), patchFile)} no longer applies to ${relative} of the test server in ` +
            `${path.relative(process.cwd(), POM)}: check whether that version fixed the bug the patch names, ` +
            'then drop the patch or redo it against the new sources.',
        );
      }
      writeFileSync(target, result);
      touched.push(target);
    }
  }
  mkdirSync(classes, { recursive: true });
  if (touched.length > 0)
    await run('javac', ['-nowarn', '-encoding', 'UTF-8', '-d', classes, '-cp', jars, ...touched], { quiet: true });
  const jar = `${classes}.jar`;
  await run('jar', ['cf', jar, '-C', classes, '.']);
  return jar;
}
