/**
 * Runs `temporal server start-dev`: a real Temporal server (SQLite-backed,
 * with the Temporal UI) for local use and tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';

export interface TemporalDevServer {
  address: string;
  uiUrl: string | null;
  process: ChildProcess;
  stop(): Promise<void>;
}

export interface TemporalDevServerOptions {
  cli: string;
  port: number;
  uiPort?: number;
  /** SQLite file for history that survives restarts; omitted: in memory. */
  dbFile?: string;
  headless?: boolean;
  httpPort?: number;
  metricsPort?: number;
  /** Namespaces to register besides `default` (the test runner gives each of its lanes one). */
  extraNamespaces?: string[];
  log: (line: string) => void;
  readyTimeoutMs?: number;
}

/**
 * The dev server runs a single history shard, and each shard reads its task queues (transfer:
 * activity and workflow tasks to dispatch; timer; visibility) at most 20 times a second by default
 * (`history.*ProcessorMaxPollRPS`). Spread over a production cluster's many shards that is no
 * limit, but here every workflow of the installation shares the one shard: once the first burst
 * was spent, every activity and every workflow task waited ~50 ms for its turn (a bare workflow of
 * 20 no-op activities took 2.0 s; 0.2 s with these). The readers still poll only when notified
 * of new tasks or at their usual idle interval, so an idle server does no more work.
 */
const DEV_SERVER_DYNAMIC_CONFIG = [
  'history.transferProcessorMaxPollRPS=10000',
  'history.timerProcessorMaxPollRPS=10000',
  'history.visibilityProcessorMaxPollRPS=10000',
];

/**
 * The CLI picks the ports of the server's internal services itself, and on Linux checks each one it
 * picked by connecting to it; on a loaded machine that check can be refused, and the CLI panics
 * ("failed assigning ephemeral port") before the server starts. Nothing was started then: start again.
 */
const EPHEMERAL_PORT_RACE = /failed assigning ephemeral port/;
const START_ATTEMPTS = 3;

export async function startTemporalDevServer(o: TemporalDevServerOptions): Promise<TemporalDevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(o);
    } catch (err) {
      if (!(err instanceof EarlyExit) || !EPHEMERAL_PORT_RACE.test(err.message) || attempt >= START_ATTEMPTS) throw err;
      o.log(`temporal server start-dev lost a race for an ephemeral port (attempt ${attempt}); starting it again`);
    }
  }
}

/** The dev server exited before it was ready. */
class EarlyExit extends Error {}

async function startOnce(o: TemporalDevServerOptions): Promise<TemporalDevServer> {
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(o.port), '--log-level', 'warn'];
  if (o.dbFile) args.push('--db-filename', o.dbFile);
  if (o.headless) args.push('--headless');
  else if (o.uiPort) args.push('--ui-port', String(o.uiPort));
  if (o.httpPort) args.push('--http-port', String(o.httpPort));
  if (o.metricsPort) args.push('--metrics-port', String(o.metricsPort));
  for (const ns of o.extraNamespaces ?? []) args.push('--namespace', ns);
  for (const value of DEV_SERVER_DYNAMIC_CONFIG) args.push('--dynamic-config-value', value);

  const child = spawn(o.cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let exited: string | null = null;
  const output: string[] = [];
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      output.push(line);
      if (output.length > 50) output.shift();
      o.log(line);
    }
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  child.on('exit', (code, signal) => {
    exited = `exited with ${signal ?? code}`;
  });

  const address = `127.0.0.1:${o.port}`;
  const deadline = Date.now() + (o.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (exited) {
      throw new EarlyExit(`temporal server start-dev ${exited} before it was ready:\n${output.join('\n')}`);
    }
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1_000 });
      await connection.workflowService.describeNamespace({ namespace: 'default' });
      await connection.close();
      break;
    } catch (err) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`Temporal dev server not ready on ${address}: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  return {
    address,
    uiUrl: o.headless ? null : `http://127.0.0.1:${o.uiPort ?? o.port + 1000}`,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}
