/**
 * The `process` container runtime (DESIGN.md): a replica is a local process
 * running the deployment's command and args, with its environment (secrets
 * already resolved), an assigned port in PORT, and its output appended to a
 * log file. It is for one machine and one trusted tenant: it runs what it is told on
 * this host, as Gantry's own user, with no isolation, and it pulls no image (`image` is
 * recorded only). So it starts only where the installation says GANTRY_SINGLE_TENANT=yes
 * (select-runtime.ts), and it runs one project's replicas: the first project it launches
 * for, or adopts, since it started; any other project's launch is refused. Tenants'
 * replicas run in the `podman` runtime (podman/podman-runtime.ts).
 *
 * Without a container there is no filesystem to mount into, so each replica
 * gets a root directory of its own: it is the process's working directory
 * (and GANTRY_MOUNT_ROOT), and a volume mounted at `/data/x` appears there as
 * `data/x`, a link to the volume's read-only files. How a Kubernetes runtime
 * maps the same calls onto pods: KUBERNETES.md.
 */
import { spawn } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { HeldReplicas, type HeldReplica } from './held-replicas';
import { openReplicaLog, replicaLogFile } from './replica-log';
import { replicaOrigin } from '../../shared/deployments';
import { freePort } from '../../platform/ports';
import { inheritedEnvironment } from '../../platform/config';
import { waitUntilHealthy } from './replica-health';
import { ReplicaFailed, type ContainerRuntime, type ReplicaExit, type ReplicaToLaunch } from './runtime';
import { PLATFORM_PROJECT_ID } from '../../shared/serverless';

export { ReplicaFailed };

/** What this host keeps of a running replica on disk, so a restarted worker can adopt it. */
export interface ReplicaRecordOnDisk {
  deploymentId: string;
  /** Absent in records of Gantry before 2026-11-28 (this host then serves whichever project launches first). */
  projectId?: string;
  replicaId: string;
  pid: number;
  port: number;
  command: string;
  /** The host directories it mounts (absent in records of Gantry before 2026-11-25: read from its root's links). */
  mounts?: string[];
}

/** A replica this runtime holds: how to signal it and when it ended. */
interface Held extends HeldReplica {
  kill(signal: NodeJS.Signals): void;
}

/** Whether `pid` is alive and still runs `command` (a pid can be reused after a reboot). */
function runsCommand(pid: number, command: string): boolean {
  try {
    process.kill(pid, 0);
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] === command;
  } catch {
    return false;
  }
}

export class ProcessRuntime implements ContainerRuntime {
  readonly kind = 'process';
  private readonly running = new HeldReplicas<Held>();
  /** The host directories each replica held mounts (mountedHostDirs). */
  private readonly mounts = new Map<string, string[]>();
  /** The one project whose replicas this host runs (servedProject), once it has run one. */
  private project: string | undefined;

  /**
   * `hostId`: this container host's stable name (GANTRY_CONTAINER_HOST_ID). With it, the runtime
   * keeps a record of each running replica under it, and a worker restarted with the same name
   * adopts the replicas that outlived the previous one. Without it nothing is kept: two workers
   * sharing a data directory must never take each other's replicas. `address`: where replicas
   * listen (their HOST) and are reached (GANTRY_CONTAINER_HOST_ADDRESS).
   */
  constructor(
    readonly logDir: string,
    private readonly hostId?: string,
    readonly address = '127.0.0.1',
  ) {}

  private recordFile(replicaId: string): string | undefined {
    return this.hostId && path.join(this.logDir, '.hosts', this.hostId, `${replicaId}.json`);
  }

  /**
   * Takes over the replicas a previous worker process of this host left running (it was killed or
   * crashed: a replica writes to its log file itself and outlives the worker). Their exit is
   * watched by polling, and they are stopped like any other. Returns what was adopted.
   */
  async adoptSurvivors(): Promise<ReplicaRecordOnDisk[]> {
    const adopted: ReplicaRecordOnDisk[] = [];
    if (!this.hostId) return adopted;
    const dir = path.join(this.logDir, '.hosts', this.hostId);
    if (!existsSync(dir)) return adopted;
    for (const f of readdirSync(dir).filter((name) => name.endsWith('.json'))) {
      const file = path.join(dir, f);
      const r = JSON.parse(readFileSync(file, 'utf8')) as ReplicaRecordOnDisk;
      if (this.running.has(r.replicaId)) continue;
      if (!runsCommand(r.pid, r.command)) {
        rmSync(file, { force: true });
        continue;
      }
      // The project the previous process of this host served is the one this one serves.
      if (r.projectId && r.projectId !== PLATFORM_PROJECT_ID) this.project ??= r.projectId;
      const exited = (async (): Promise<ReplicaExit> => {
        while (runsCommand(r.pid, r.command)) await sleep(500, undefined, { ref: false });
        rmSync(file, { force: true });
        // Not our child: its exit status cannot be read.
        return { code: null, signal: null };
      })();
      const kill = (sig: NodeJS.Signals) => {
        try {
          process.kill(r.pid, sig);
        } catch {
          // it exited meanwhile
        }
      };
      this.running.set(r.replicaId, { deploymentId: r.deploymentId, kill, exited });
      this.mounts.set(r.replicaId, r.mounts ?? linksIn(this.rootDir(r.deploymentId, r.replicaId)));
      adopted.push(r);
    }
    return adopted;
  }

  logFile(deploymentId: string, replicaId: string): string {
    return replicaLogFile(this.logDir, deploymentId, replicaId);
  }

  /** The replica's root: its working directory, where mount paths appear. */
  rootDir(deploymentId: string, replicaId: string): string {
    return path.join(this.logDir, deploymentId, `${replicaId}.root`);
  }

  /** Starts the process and waits until its health check answers 2xx; returns the port it serves. */
  async launch(r: ReplicaToLaunch, onProgress: () => void): Promise<number> {
    this.serveOnly(r.projectId);
    const argv = [...r.command, ...r.args];
    if (!r.command.length) throw new ReplicaFailed('The process runtime needs a command to run (it pulls no images).');
    const port = await freePort(this.address);
    const logFile = this.logFile(r.deploymentId, r.replicaId);
    // The replica writes to its log file itself (no pipe through this process), so it outlives a
    // crash of this worker and a restarted one can adopt it (adoptSurvivors).
    const log = openReplicaLog(this.logDir, logFile);
    const root = this.prepareRoot(r);
    const { PATH = '' } = inheritedEnvironment();
    const child = spawn(argv[0], argv.slice(1), {
      cwd: root,
      env: { PATH, ...r.env, HOST: this.address, PORT: String(port), GANTRY_MOUNT_ROOT: root },
      stdio: ['ignore', log, log],
    });
    closeSync(log);
    const record = this.recordFile(r.replicaId);
    const exited = new Promise<ReplicaExit>((resolve) => {
      child.once('error', (err) => {
        appendFileSync(logFile, `[gantry] could not start ${argv[0]}: ${err.message}\n`);
        resolve({ code: null, signal: null });
      });
      child.once('exit', (code, signal) => {
        if (record) rmSync(record, { force: true });
        appendFileSync(logFile, `[gantry] replica exited (code ${code}, signal ${signal})\n`);
        resolve({ code, signal });
      });
    });
    if (record && child.pid !== undefined) {
      mkdirSync(path.dirname(record), { recursive: true });
      const onDisk: ReplicaRecordOnDisk = {
        deploymentId: r.deploymentId,
        projectId: r.projectId,
        replicaId: r.replicaId,
        pid: child.pid,
        port,
        command: argv[0],
        mounts: r.mounts.map((m) => m.hostDir),
      };
      writeFileSync(record, JSON.stringify(onDisk));
    }
    this.running.set(r.replicaId, {
      deploymentId: r.deploymentId,
      kill: (sig) => child.kill(sig),
      exited,
      release: () => child.unref(),
    });
    this.mounts.set(
      r.replicaId,
      r.mounts.map((m) => m.hostDir),
    );
    try {
      await waitUntilHealthy({
        origin: replicaOrigin(this.address, port),
        healthPath: r.healthPath,
        timeoutMs: r.healthTimeoutMs,
        exited,
        onProgress,
        stop: () => this.stop(r.replicaId, 0),
      });
    } catch (err) {
      this.running.delete(r.replicaId);
      throw err;
    }
    return port;
  }

  /**
   * Refuses a replica of any project but the one this host serves (the first it launched for or
   * adopted): a replica here has Gantry's user and rights, so a second project's would reach the
   * first one's files. Checked and taken before any await, so two launches cannot both take it.
   * The refusal does not name the project served (it is another tenant's). The platform's own
   * project is no tenant: its replicas are the serverless pools, the installation's own model server
   * with the spec it wrote itself (api/serverless-pools.ts), so they run beside the one tenant's.
   */
  private serveOnly(projectId: string): void {
    if (projectId === PLATFORM_PROJECT_ID) return;
    this.project ??= projectId;
    if (this.project !== projectId)
      throw new ReplicaFailed(
        'This installation runs replicas as host processes of its own user (GANTRY_CONTAINER_RUNTIME=process, ' +
          'GANTRY_SINGLE_TENANT=yes), for one project only, and that is another project. ' +
          "This project's deployments need a host with GANTRY_CONTAINER_RUNTIME=podman.",
      );
  }

  /** A fresh root with a link per mount (mount paths were checked to be absolute and plain at deploy). */
  private prepareRoot(r: ReplicaToLaunch): string {
    const root = this.rootDir(r.deploymentId, r.replicaId);
    rmSync(root, { recursive: true, force: true });
    mkdirSync(root, { recursive: true });
    for (const m of r.mounts) {
      const at = path.resolve(root, '.' + path.posix.normalize(m.mountPath));
      if (!at.startsWith(root + path.sep))
        throw new ReplicaFailed(`mount path ${m.mountPath} leaves the replica's root`);
      mkdirSync(path.dirname(at), { recursive: true });
      symlinkSync(m.hostDir, at, 'dir');
    }
    return root;
  }

  async mountedHostDirs(): Promise<string[]> {
    const dirs: string[] = [];
    for (const [replicaId, mounted] of this.mounts) {
      if (this.running.has(replicaId)) dirs.push(...mounted);
      else this.mounts.delete(replicaId);
    }
    return dirs;
  }

  heldReplicas(): Array<{ deploymentId: string; replicaId: string }> {
    return this.running.list();
  }

  waitForExit(replicaId: string, signal: AbortSignal): Promise<ReplicaExit | null> {
    return this.running.waitForExit(replicaId, signal);
  }

  /** SIGTERM, then SIGKILL after the grace period. */
  async stop(replicaId: string, graceSeconds: number): Promise<void> {
    const r = this.running.get(replicaId);
    if (!r) return;
    r.kill('SIGTERM');
    // The grace timer goes as soon as the replica exits: a pending timer would hold this process open.
    const grace = new AbortController();
    const killed = await Promise.race([
      r.exited.then(() => true),
      sleep(graceSeconds * 1000, false, { signal: grace.signal }).catch(() => false),
    ]);
    grace.abort();
    if (!killed) {
      r.kill('SIGKILL');
      await r.exited;
    }
    this.running.delete(replicaId);
  }

  /** Every replica this host runs, for shutdown. */
  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((id) => this.stop(id, 2)));
  }

  /**
   * Leaves every replica running for the next process of this host (which adopts them through
   * their records) and lets go of them, so that this process can exit.
   */
  release(): void {
    this.running.releaseAll();
  }
}

/** What the links in a replica's root point to: its mounts (prepareRoot). */
function linksIn(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isSymbolicLink())
    .map((entry) => readlinkSync(path.join(entry.parentPath, entry.name)));
}
