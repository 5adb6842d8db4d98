/**
 * The whole platform as `./dev up` runs it (scripts/up.ts: its own Temporal dev server on a SQLite
 * file, its own embedded PostgreSQL, the API, the gateway and the workers), on a data directory of
 * the test's, in its own process tree, so that a test can kill every process of it at once with
 * SIGKILL, or only PostgreSQL or only Temporal, and start them again on the same data.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startEmbeddedPostgres } from '../../db/embedded';
import { freePort } from '../../platform/ports';
import { startTemporalDevServer } from '../../scripts/lib/temporal-dev-server';
import { NODE_TYPESCRIPT_ARGS } from '../../platform/node-typescript';

const ROOT = path.resolve(__dirname, '../..');

/** The pids of `pid` and every process below it, read from /proc (what a power cut would take). */
function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses; the last ')' ends it.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
  }
  const tree: number[] = [];
  const todo = [pid];
  while (todo.length) {
    const p = todo.pop()!;
    tree.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return tree;
}

const commandLine = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return '';
  }
};

/** SIGKILL to every pid at once (one loop, no waits between); those already gone are skipped. */
function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // exited already
    }
  }
}

/** Resolves once none of `pids` exists any more (positive evidence the kill took). */
async function gone(pids: number[]): Promise<void> {
  while (pids.some((p) => existsSync(`/proc/${p}`) && !readFileSync(`/proc/${p}/stat`, 'utf8').includes(') Z'))) {
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface CrashPlatform {
  dataDir: string;
  apiUrl: string;
  gatewayUrl: string;
  temporalAddress: string;
  /** The admin key `./dev up` wrote on first start (the default project's). */
  adminKey(): string;
  /** PostgreSQL's URL (its password is kept beside its data, as ./dev up keeps it). */
  databaseUrl(): string;
  /** Starts `./dev up`'s script on the data directory; resolves when it says ready. */
  up(): Promise<void>;
  /** Every process of the platform, SIGKILLed at once; resolves when none is left. */
  killEverything(): Promise<void>;
  /** PostgreSQL's processes alone, SIGKILLed at once. */
  killPostgres(): Promise<void>;
  /** PostgreSQL started again on the same data and port, as a supervisor restarting it would. */
  restartPostgres(): Promise<void>;
  /** The Temporal dev server alone, SIGKILLed. */
  killTemporal(): Promise<void>;
  /** The Temporal dev server started again on the same SQLite file and port. */
  restartTemporal(): Promise<void>;
  /** The platform's output so far (for failure messages). */
  output(): string;
  /** Kills whatever of it still runs. */
  stop(): Promise<void>;
}

export async function crashPlatform(dataDir: string, env: Record<string, string>): Promise<CrashPlatform> {
  const ports = {
    api: await freePort(),
    gateway: await freePort(),
    postgres: await freePort(),
    temporal: await freePort(),
    temporalUi: await freePort(),
    metrics: await freePort(),
  };
  let up: ChildProcess | undefined;
  let out = '';
  /** What the test itself started again (PostgreSQL, Temporal) after up.ts's own were killed. */
  const restarted: Array<() => number[]> = [];
  const childEnv: NodeJS.ProcessEnv = {
    ...process.env,
    GANTRY_DATA_DIR: dataDir,
    GANTRY_API_PORT: String(ports.api),
    GANTRY_GATEWAY_PORT: String(ports.gateway),
    GANTRY_POSTGRES_PORT: String(ports.postgres),
    GANTRY_TEMPORAL_PORT: String(ports.temporal),
    GANTRY_TEMPORAL_UI_PORT: String(ports.temporalUi),
    // Five metrics ports from here; a free one is found for the first (the rest are rarely taken).
    GANTRY_METRICS_BASE_PORT: String(ports.metrics),
    LOG_LEVEL: 'warn',
    ...env,
  };
  // The platform brings its own Temporal and PostgreSQL, as ./dev up on a fresh machine.
  for (const k of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'TEMPORAL_NAMESPACE', 'GANTRY_ADMIN_KEY_FILE'])
    delete childEnv[k];
  const pgDir = path.join(dataDir, 'postgres');
  const temporalAddress = `127.0.0.1:${ports.temporal}`;

  const platformPids = () => [...(up?.pid ? processTree(up.pid) : []), ...restarted.flatMap((r) => r())];

  return {
    dataDir,
    apiUrl: `http://127.0.0.1:${ports.api}`,
    gatewayUrl: `http://127.0.0.1:${ports.gateway}`,
    temporalAddress,
    adminKey: () => readFileSync(path.join(dataDir, 'admin-api-key'), 'utf8').trim(),
    databaseUrl: () => {
      const password = readFileSync(`${pgDir}.password`, 'utf8').trim();
      return `postgres://gantry:${encodeURIComponent(password)}@127.0.0.1:${ports.postgres}/gantry`;
    },
    async up() {
      restarted.length = 0;
      const child = spawn(process.execPath, [...NODE_TYPESCRIPT_ARGS, path.join(ROOT, 'scripts/up.ts')], {
        cwd: ROOT,
        env: childEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
        // Its own process group: one kill reaches every process of it at once, a backend that
        // PostgreSQL forks in that instant included (a scan of the tree would miss it, and a
        // survivor holding the old shared memory keeps the next PostgreSQL from starting).
        detached: true,
      });
      up = child;
      // Only this start's output says whether it is ready (the last start's said so too).
      let mine = '';
      let ready = false;
      const onData = (chunk: Buffer) => {
        out += chunk.toString('utf8');
        mine += chunk.toString('utf8');
        if (/\[gantry\] ready:/.test(mine)) ready = true;
      };
      child.stdout!.on('data', onData);
      child.stderr!.on('data', onData);
      const deadline = Date.now() + 240_000;
      while (!ready) {
        if (child.exitCode !== null) throw new Error(`./dev up exited ${child.exitCode}:\n${mine.slice(-4000)}`);
        if (Date.now() > deadline) throw new Error(`./dev up was not ready in 240 s:\n${mine.slice(-4000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async killEverything() {
      const group = up!.pid!;
      const restartedPids = restarted.flatMap((r) => r());
      process.kill(-group, 'SIGKILL');
      killAll(restartedPids);
      await gone([...inGroup(group), ...restartedPids]);
      while (inGroup(group).length) await new Promise((r) => setTimeout(r, 20));
    },
    async killPostgres() {
      const postmaster = Number(readFileSync(path.join(pgDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      // Stopped first, it forks no backend between the scan of its tree and the kill.
      process.kill(postmaster, 'SIGSTOP');
      const pids = processTree(postmaster);
      killAll(pids);
      await gone(pids);
    },
    async restartPostgres() {
      await startEmbeddedPostgres({ dir: pgDir, port: ports.postgres, persistent: true });
      restarted.push(() => {
        const pidFile = path.join(pgDir, 'postmaster.pid');
        return existsSync(pidFile) ? processTree(Number(readFileSync(pidFile, 'utf8').split('\n')[0])) : [];
      });
    },
    async killTemporal() {
      const pids = platformPids().filter((p) => / server start-dev /.test(commandLine(p)));
      if (pids.length !== 1) throw new Error(`expected one Temporal dev server, found ${pids.length}`);
      killAll(pids);
      await gone(pids);
    },
    async restartTemporal() {
      const server = await startTemporalDevServer({
        cli: process.env.TEMPORAL_CLI ?? 'temporal',
        port: ports.temporal,
        uiPort: ports.temporalUi,
        dbFile: path.join(dataDir, 'temporal.sqlite'),
        log: () => undefined,
      });
      restarted.push(() => (server.process.pid ? processTree(server.process.pid) : []));
    },
    output: () => out,
    async stop() {
      if (up?.pid && inGroup(up.pid).length) process.kill(-up.pid, 'SIGKILL');
      const pids = [...platformPids(), ...platformPidsOf(ports.temporal)];
      killAll(pids);
      await gone(pids);
    },
  };
}

/** The live processes of a process group (zombies aside). */
function inGroup(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
        const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        return state !== 'Z' && Number(pgrp) === pgid;
      } catch {
        return false;
      }
    });
}

/** The Temporal dev server listening on `port`, found by its command line. */
function platformPidsOf(port: number): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => new RegExp(` server start-dev .*--port ${port} `).test(commandLine(p)));
}
