/**
 * Temporal's time-skipping test server for the workflow test tier.
 *
 * The Node SDK would download a native build of this server from outside the
 * package registries, which this project's machines cannot reach. The same
 * server is published on Maven Central (io.temporal:temporal-test-server), so
 * it is resolved here with Maven from test/workflow-server/pom.xml, once per
 * pom (the classpath is cached under ~/.cache/gantry), and run on the JVM by
 * test/workflow-server/test-server.sh. Without Java or Maven it stops and says
 * what to install; nothing stands in for the server.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';

const DIR = path.resolve(__dirname, '..', '..', 'test', 'workflow-server');
const POM = path.join(DIR, 'pom.xml');
/** The executable handed to TestWorkflowEnvironment.createTimeSkipping as an existing path. */
export const WORKFLOW_TEST_SERVER = path.join(DIR, 'test-server.sh');
/** The environment variable test-server.sh reads the classpath file from. */
export const CLASSPATH_ENV = 'GANTRY_WORKFLOW_TEST_SERVER_CLASSPATH';

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', (err) =>
      reject(
        new Error(
          `${cmd} is needed for the workflow tests' time-skipping server and could not be run (${err.message}). ` +
            'Install a JDK (17 or later) and Maven (Debian: apt-get install default-jdk-headless maven).',
        ),
      ),
    );
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}`))));
  });
}

/** Resolves the server's classpath (first run: Maven downloads about 30 MB) and returns the file that holds it. */
export async function ensureWorkflowTestServer(log: (line: string) => void): Promise<string> {
  const hash = createHash('sha256').update(readFileSync(POM)).digest('hex').slice(0, 12);
  const base = process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache');
  const cacheDir = path.join(base, 'gantry', `workflow-test-server-${hash}`);
  const classpath = path.join(cacheDir, 'classpath.txt');
  if (existsSync(classpath)) {
    const jars = readFileSync(classpath, 'utf8').trim().split(':');
    if (jars.every((jar) => existsSync(jar))) return classpath;
  }
  mkdirSync(cacheDir, { recursive: true });
  log('Resolving Temporal time-skipping test server from Maven Central (first run only)...');
  await run('mvn', ['-q', '-B', '-f', POM, 'dependency:build-classpath', `-Dmdep.outputFile=${classpath}`]);
  return classpath;
}
