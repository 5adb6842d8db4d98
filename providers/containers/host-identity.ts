/**
 * Who a container host is, and which hosts run on this machine now.
 *
 * A host's name (`gantry.host` on its containers, `containers@<name>` its queue) is how its next
 * process finds the replicas the last one left running. An operator names a host with
 * GANTRY_CONTAINER_HOST_ID; one left unnamed (the default single-machine setup, `./dev up`) keeps
 * the name it was first given in its data directory, so a host restarted after a crash is the same
 * host and adopts its containers.
 *
 * Each host process claims its name in a directory of the machine (LiveHosts): a host starting on
 * the machine tells from it whether the host that labelled a container still runs (podman-runtime.ts
 * `adoptSurvivors`), and an unnamed host whose kept name another live process already holds (two
 * hosts on one data directory) takes a name of its own for this run instead.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';

/** What GANTRY_CONTAINER_HOST_ID accepts (platform/config.ts), and so what a host's name may be. */
export const HOST_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** A name no other host has, for a host that is new with each process. */
export function newHostName(prefix = hostname()): string {
  const base =
    prefix
      .replace(/[^A-Za-z0-9._-]/g, '-')
      .replace(/^[^A-Za-z0-9]+/, '')
      .slice(0, 40) || 'host';
  return `${base}-${randomBytes(4).toString('hex')}`;
}

/**
 * The name of the unnamed host of the data directory `dataDir`: made up the first time and kept
 * there (`container-host-id`), so every later process of it is the same host.
 */
export function keptHostName(dataDir: string): string {
  const file = path.join(dataDir, 'container-host-id');
  const read = () => {
    try {
      const name = readFileSync(file, 'utf8').trim();
      return HOST_NAME.test(name) ? name : undefined;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  };
  const kept = read();
  if (kept) return kept;
  mkdirSync(dataDir, { recursive: true });
  try {
    writeFileSync(file, `${newHostName()}\n`, { flag: 'wx' });
  } catch (err) {
    // Another process of this data directory wrote it first: its name is the one.
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const name = read();
  if (!name) throw new Error(`${file} holds no host name: remove it to have one made again`);
  return name;
}

/**
 * A process as the kernel knows it: its pid and when it started, so that a pid the kernel has
 * given to another process since does not pass for the one that claimed a name. (Without /proc, the
 * pid alone.)
 */
export function processIdentity(pid: number = process.pid): string {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `starttime` is field 22; count from after the command, which may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return `${pid}:${fields[19]}`;
  } catch {
    return `${pid}:`;
  }
}

function running(identity: string): boolean {
  const [pid, started] = identity.split(':');
  if (!/^\d+$/.test(pid ?? '')) return false;
  try {
    process.kill(Number(pid), 0);
  } catch (err) {
    // EPERM: it runs, as another user.
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return !started || processIdentity(Number(pid)) === identity;
}

/** The host names that processes on this machine claimed, each file naming the process that holds it. */
export class LiveHosts {
  constructor(readonly dir: string) {}

  /** `name` is this process's from now until it exits. Claims of processes that are gone are cleared. */
  claim(name: string): void {
    if (!HOST_NAME.test(name)) throw new Error(`not a container host name: ${JSON.stringify(name)}`);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    for (const other of readdirSync(this.dir)) {
      if (HOST_NAME.test(other) && other !== name && !this.holder(other))
        rmSync(path.join(this.dir, other), { force: true });
    }
    const tmp = path.join(this.dir, `.${name}.${process.pid}`);
    writeFileSync(tmp, processIdentity());
    renameSync(tmp, path.join(this.dir, name));
  }

  /** Whether a process that still runs (this one included) holds `name`. */
  isHeld(name: string): boolean {
    return this.holder(name) !== undefined;
  }

  /** Whether a process that still runs holds `name`, and it is not this one. */
  heldByAnother(name: string): boolean {
    const holder = this.holder(name);
    return holder !== undefined && holder !== processIdentity();
  }

  /** The process that holds `name` and still runs. */
  private holder(name: string): string | undefined {
    if (!HOST_NAME.test(name)) return undefined;
    try {
      const identity = readFileSync(path.join(this.dir, name), 'utf8').trim();
      return running(identity) ? identity : undefined;
    } catch {
      return undefined;
    }
  }
}
