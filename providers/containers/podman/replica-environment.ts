/**
 * How a replica's variables (its deployment's values and secrets, and what
 * Gantry adds) reach its container without being in any host process's
 * environment or command line. The Podman client runs as root on this host:
 * a tenant's `LD_PRELOAD` or `LD_DEBUG` in its environment would run the
 * tenant's code, or the host linker's reports, in it. So the client's
 * environment is a fixed one (PodmanEngine.env), and the variables travel as
 * data:
 *
 * - Values of one line go through an environment file (`--env-file`) that is
 *   a named pipe (FIFO) in a directory of this host's root only: its lines
 *   never rest on disk. The pipe's name is removed as soon as Podman has
 *   opened it, and Podman reads it to the end before it creates the container.
 * - Values an environment file cannot hold (several lines, a carriage return,
 *   a line longer than Podman reads: its scanner stops at 64 KiB) go as Podman
 *   secrets of type `env` (`--secret NAME,type=env,target=VAR`), each created
 *   from a named pipe the same way, and removed as soon as Podman has read
 *   them: once conmon is up (it writes `--conmon-pidfile` after Podman has
 *   built the container's spec, secrets included) or the client has exited.
 *   (Not from standard input: Podman takes that only from a pipe, and Node's
 *   child processes get a socket.)
 *
 * A launch's directory is named after the process that made it (its pid and
 * start time: a pid alone comes back, in a container at every start); one left
 * by a process that is gone (with the names of any secrets it made) is removed
 * by the next start of the host (`removeLeftovers`).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, openSync, readFileSync, watch } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

import { ReplicaFailed } from '../runtime';
import { SYSTEM_PATH, type PodmanEngine } from './podman-engine';

const run = promisify(execFile);

/** What a variable's name may be: what the API takes (a name of any other shape would break a line). */
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The longest line of an environment file sent as one: Podman's line scanner takes up to 64 KiB. */
const MAX_LINE_BYTES = 60_000;

/**
 * Splits the variables into the environment file's text and those it cannot hold. A name of another
 * shape, or a NUL in a value (which no environment can hold), fails the launch: they never reach Podman.
 */
export function splitVariables(env: Record<string, string>): {
  fileText: string;
  apart: Array<{ name: string; value: string }>;
} {
  let fileText = '';
  const apart: Array<{ name: string; value: string }> = [];
  for (const [name, value] of Object.entries(env)) {
    if (!VARIABLE_NAME.test(name)) throw new ReplicaFailed(`${JSON.stringify(name)} is not a variable name.`);
    if (value.includes('\0')) throw new ReplicaFailed(`The value of ${name} holds a NUL byte, which no variable can.`);
    const line = `${name}=${value}\n`;
    if (/[\r\n]/.test(value) || Buffer.byteLength(line) > MAX_LINE_BYTES) apart.push({ name, value });
    else fileText += line;
  }
  return { fileText, apart };
}

/** One launch's variables, on their way into its container. */
export class LaunchEnvironment {
  private constructor(
    private readonly engine: PodmanEngine,
    private readonly dir: string,
    private readonly fileText: string,
    private readonly secrets: Array<{ secret: string; target: string }>,
  ) {}

  /**
   * Makes the launch's directory, its environment file (a FIFO, written once Podman opens it) and
   * its secrets; `args` are what `podman run` takes for them.
   */
  static async prepare(engine: PodmanEngine, root: string, env: Record<string, string>): Promise<LaunchEnvironment> {
    const { fileText, apart } = splitVariables(env);
    await mkdir(root, { recursive: true, mode: 0o700 });
    await chmod(root, 0o700);
    const dir = await mkdtemp(path.join(root, `${processIdentity(process.pid)}-`)); // 0700
    const launch = new LaunchEnvironment(engine, dir, fileText, []);
    try {
      await makeFifo(launch.fifo);
      for (const { name, value } of apart) {
        const secret = `gantry-env-${randomBytes(12).toString('hex')}`;
        // Recorded first: a process that dies from here on leaves the name for removeLeftovers.
        await writeFile(path.join(dir, 'secrets'), [...launch.secrets.map((s) => s.secret), secret].join('\n'), {
          mode: 0o600,
        });
        launch.secrets.push({ secret, target: name });
        const fifo = path.join(dir, 'secret');
        await makeFifo(fifo);
        const creating = engine.podman(['secret', 'create', '--', secret, fifo]);
        await writeFifo(
          fifo,
          value,
          creating.catch(() => undefined),
        );
        await creating;
      }
      return launch;
    } catch (err) {
      await launch.remove();
      throw err instanceof ReplicaFailed
        ? err
        : new ReplicaFailed(`The replica's variables could not be handed to Podman: ${(err as Error).message}`);
    }
  }

  private get fifo(): string {
    return path.join(this.dir, 'env');
  }

  private get pidFile(): string {
    return path.join(this.dir, 'conmon.pid');
  }

  /** The options of `podman run` that hand the variables over. */
  get args(): string[] {
    return [
      '--env-file',
      this.fifo,
      '--conmon-pidfile',
      this.pidFile,
      ...this.secrets.flatMap((s) => ['--secret', `${s.secret},type=env,target=${s.target}`]),
    ];
  }

  /**
   * Writes the environment file to the client as it reads it, and removes the secrets once Podman
   * has read them (or the client has exited); the launch's directory goes with the client. Call it
   * right after spawning the client; it never fails.
   */
  async deliver(clientExited: Promise<unknown>): Promise<void> {
    try {
      await writeFifo(this.fifo, this.fileText, clientExited);
      if (this.secrets.length) {
        await this.conmonStarted(clientExited);
        await this.removeSecrets();
      }
    } catch {
      await this.removeSecrets(); // what could not be handed over goes now
    }
    void clientExited.then(() => this.remove());
  }

  /**
   * Resolves once conmon has written its pid file (Podman has built the container's spec, its
   * secrets read) or the client has exited. The file stays: Podman reads conmon's pid from it.
   */
  private async conmonStarted(clientExited: Promise<unknown>): Promise<void> {
    await new Promise<void>((resolve) => {
      const watcher = watch(this.dir, () => {
        if (existsSync(this.pidFile)) done();
      });
      const done = () => {
        watcher.close();
        resolve();
      };
      void clientExited.then(done);
      if (existsSync(this.pidFile)) done();
    });
  }

  /** Takes out the secrets (once), and the record of their names. */
  private async removeSecrets(): Promise<void> {
    await removeSecrets(
      this.engine,
      this.secrets.splice(0).map((s) => s.secret),
    );
    await rm(path.join(this.dir, 'secrets'), { force: true });
  }

  /** Takes out the secrets and the launch's directory. */
  async remove(): Promise<void> {
    await this.removeSecrets();
    await rm(this.dir, { recursive: true, force: true });
  }

  /** Takes out what launches of processes that are gone left (they died part way). Never fails. */
  static async removeLeftovers(engine: PodmanEngine, root: string): Promise<string[]> {
    const names = await readdir(root).catch(() => [] as string[]);
    const removed: string[] = [];
    for (const name of names) {
      const [, identity, pid] = /^((\d+)\.\d+)-/.exec(name) ?? [];
      if (!identity || processIdentity(Number(pid)) === identity) continue; // its process runs

      const dir = path.join(root, name);
      const secrets = (await readFile(path.join(dir, 'secrets'), 'utf8').catch(() => '')).split('\n').filter(Boolean);
      await removeSecrets(engine, secrets);
      await rm(dir, { recursive: true, force: true });
      removed.push(name);
    }
    return removed;
  }
}

function makeFifo(file: string): Promise<unknown> {
  return run('mkfifo', ['-m', '0600', file], { env: { PATH: SYSTEM_PATH } });
}

/**
 * Writes `text` into the named pipe `fifo` once its reader (a Podman process) opens it, and removes
 * the pipe's name as soon as it is open. Resolves once written, or once `readerGone` resolves
 * before the reader opened it.
 */
async function writeFifo(fifo: string, text: string, readerGone: Promise<unknown>): Promise<void> {
  // An open for writing waits for a reader: Podman opens the file as it parses its options.
  const opening = open(fifo, 'w');
  const opened = await Promise.race([opening, readerGone.then(() => undefined)]);
  if (opened) {
    await rm(fifo, { force: true });
    await opened.writeFile(text).catch(() => undefined); // a reader that died reading it
    await opened.close();
    return;
  }
  // Gone before it opened the file: open the other end, so that the open for writing returns.
  // (Here, not in the thread pool, where opens for writing may be all that waits.)
  const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
  await (await opening.catch(() => undefined))?.close();
  closeSync(reader);
  await rm(fifo, { force: true });
}

/** Never fails; one at a time: a name recorded by a process that died before it made the secret is not there. */
async function removeSecrets(engine: PodmanEngine, secrets: string[]): Promise<void> {
  for (const secret of secrets) await engine.podman(['secret', 'rm', '--', secret]).catch(() => undefined);
}

/** `pid.starttime` of a running process (/proc/PID/stat), which no later process shares; undefined if none runs. */
export function processIdentity(pid: number): string | undefined {
  try {
    // The fields after the command's closing parenthesis; the start time is the 22nd field of all.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return `${pid}.${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]}`;
  } catch {
    return undefined;
  }
}
