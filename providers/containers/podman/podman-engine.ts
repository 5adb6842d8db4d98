/**
 * How Gantry runs Podman (Debian's `podman`, rootful): every call goes through
 * `podman()` with Gantry's own containers.conf (CONTAINERS_CONF), written once
 * per data directory from what this machine allows:
 *
 * - Resource limits (ulimits) no higher than this process's hard limits. A root
 *   without CAP_SYS_RESOURCE (a container host that is itself a container or a
 *   locked-down VM) may not raise them, and Podman's defaults (nofile 1048576,
 *   nproc from the kernel) make runc and crun refuse with `setrlimit
 *   RLIMIT_NPROC/RLIMIT_NOFILE: Operation not permitted`.
 * - runc rather than crun where the cgroup hierarchy is hybrid (v1 controllers
 *   with an empty v2 mount): crun 1.8 refuses that layout outright.
 * - cgroupfs, not systemd, as the cgroup manager: a container host need not run systemd.
 *
 * Podman's storage is Gantry's own, with a storage.conf beside (CONTAINERS_STORAGE_CONF): one btrfs
 * filesystem with quotas per machine, which bounds every replica's writable layer and all images
 * together (container-storage.ts). Every `podman()` call waits until it is mounted.
 *
 * Each container gets its own user namespace (podman-runtime.ts), carved from the subordinate
 * ids /etc/subuid and /etc/subgid give the user `containers`: `unavailable()` refuses to start
 * without them rather than run tenants' containers as the host's root.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

import { DEFAULT_CONTAINER_STORAGE_GIB, inheritedEnvironment } from '../../../platform/config';
import {
  PULL_TMP_DIR,
  containerStorageUnavailable,
  prepareContainerStorage,
  storageConf,
  writableLayerHook,
} from './container-storage';

const run = promisify(execFile);

/** PATH for Podman and what it runs (conmon, runc, iptables): system directories only. */
export const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export class PodmanError extends Error {}

/** The hard limit this process runs under for one resource of /proc/self/limits, or undefined if unlimited. */
function hardLimit(limits: string, label: string): number | undefined {
  const line = limits.split('\n').find((l) => l.startsWith(label));
  const hard = line?.slice(label.length).trim().split(/\s+/)[1];
  return hard && /^\d+$/.test(hard) ? Number(hard) : undefined;
}

/**
 * The user whose subordinate ids Podman's `--userns=auto` hands out, and the range ./dev and the
 * Dockerfile give it: the upper half of the 32-bit ids, far from any real account's.
 */
export const SUBORDINATE_USER = 'containers';
export const SUBORDINATE_RANGE = '2147483647:2147483648';

/** Why a subordinate id file gives `containers` no usable range, or undefined when it does. */
export function subordinateIdsMissing(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return `${file} does not exist`;
  }
  // user:first:count, with at least 65,536 ids: one container's worth (Podman's default size).
  const ranges = text.split('\n').map((l) => l.trim().split(':'));
  const usable = ranges.some((r) => r.length === 3 && r[0] === SUBORDINATE_USER && Number(r[2]) >= 65536);
  return usable ? undefined : `${file} gives the user ${SUBORDINATE_USER} no range of at least 65536 ids`;
}

/** Whether cgroup v1 controllers are mounted (v2 may be mounted beside them, empty: the hybrid layout). */
function cgroupV1(): boolean {
  return existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes');
}

/**
 * The containers.conf for this machine (see the file's comment for why each setting). `hooksDir`:
 * Gantry's OCI hooks (container-storage.ts), beside the system's (a GPU toolkit's, say).
 */
export function containersConf(hooksDir: string): string {
  const limits = readFileSync('/proc/self/limits', 'utf8');
  const ulimits: string[] = [];
  const nofile = Math.min(hardLimit(limits, 'Max open files') ?? 1 << 20, 1 << 20);
  // Podman's conmon runs with RLIMIT_NPROC 32768 (seen on Debian's Podman 4.3), and runc may not
  // hand a container more than its parent holds.
  const nproc = Math.min(hardLimit(limits, 'Max processes') ?? 32768, 32768);
  ulimits.push(`"nofile=${nofile}:${nofile}"`, `"nproc=${nproc}:${nproc}"`);
  return [
    '# Written by Gantry (providers/containers/podman/podman-engine.ts); rewritten at each start.',
    '[containers]',
    `default_ulimits = [${ulimits.join(', ')}]`,
    '[engine]',
    `runtime = "${cgroupV1() ? 'runc' : 'crun'}"`,
    'cgroup_manager = "cgroupfs"',
    'events_logger = "file"',
    `hooks_dir = ["/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d", "${hooksDir}"]`,
    `image_copy_tmp_dir = "${PULL_TMP_DIR}"`,
    '',
  ].join('\n');
}

export class PodmanEngine {
  readonly confFile: string;
  readonly storageConfFile: string;
  private storageMounted?: Promise<void>;
  /**
   * An auth file with no credentials (`--authfile`): a pull made with it gets only what its
   * registry gives anyone, whatever credentials this host holds (podman-runtime.ts).
   */
  readonly noCredentialsFile: string;

  /**
   * `stateDir`: this engine's own directory (its containers.conf, launches under way), this host's
   * root's only. `storageGiB`: the size of the container storage this machine gets if it has none yet.
   */
  constructor(
    readonly stateDir: string,
    private readonly opts: { storageGiB?: number } = {},
  ) {
    const hooksDir = path.join(stateDir, 'hooks.d');
    mkdirSync(hooksDir, { recursive: true });
    writeFileSync(path.join(hooksDir, 'gantry-writable-layer.json'), writableLayerHook());
    this.confFile = path.join(stateDir, 'containers.conf');
    writeFileSync(this.confFile, containersConf(hooksDir));
    this.storageConfFile = path.join(stateDir, 'storage.conf');
    writeFileSync(this.storageConfFile, storageConf());
    this.noCredentialsFile = path.join(stateDir, 'no-credentials.json');
    writeFileSync(this.noCredentialsFile, '{"auths": {}}\n', { mode: 0o600 });
  }

  /** Mounts Gantry's container storage unless it is (once per engine, again after a failure). */
  prepareStorage(): Promise<void> {
    this.storageMounted ??= prepareContainerStorage(this.opts.storageGiB ?? DEFAULT_CONTAINER_STORAGE_GIB).catch(
      (err: Error) => {
        this.storageMounted = undefined;
        throw new PodmanError(err.message);
      },
    );
    return this.storageMounted;
  }

  /**
   * The whole environment of a Podman process: the system PATH and Gantry's containers.conf and
   * storage.conf, and nothing else, ever. Podman runs as root, and what is in its environment steers
   * it and what it loads (LD_PRELOAD, CONTAINERS_*, …): nothing of a tenant's goes here
   * (replica-environment.ts says how a replica's variables travel). A process spawned with it comes
   * after a `podman()` call, which mounted the storage.
   */
  env(): NodeJS.ProcessEnv {
    return {
      PATH: SYSTEM_PATH,
      HOME: '/root',
      CONTAINERS_CONF: this.confFile,
      CONTAINERS_STORAGE_CONF: this.storageConfFile,
    };
  }

  /** Runs `podman args…` and answers its standard output; fails with Podman's own message. */
  async podman(args: string[], opts: { timeoutMs?: number } = {}): Promise<string> {
    await this.prepareStorage();
    try {
      const { stdout } = await run('podman', args, {
        env: this.env(),
        timeout: opts.timeoutMs ?? 120_000,
        maxBuffer: 16 << 20,
      });
      return stdout;
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new PodmanError(`podman ${args[0]}: ${(e.stderr || e.message).trim().split('\n').slice(-3).join(' ')}`);
    }
  }

  /** Why this machine cannot run Podman containers, or undefined when it can. */
  static async unavailable(): Promise<string | undefined> {
    if (process.getuid?.() !== 0) return 'the podman runtime runs rootful Podman: start the container host as root';
    const found = (inheritedEnvironment().PATH ?? SYSTEM_PATH)
      .split(':')
      .concat(SYSTEM_PATH.split(':'))
      .some((dir) => existsSync(path.join(dir, 'podman')));
    if (!found) return 'podman is not installed (Debian: apt-get install podman runc)';
    if (cgroupV1() && !['/usr/bin/runc', '/usr/sbin/runc'].some(existsSync))
      return 'this machine has cgroup v1 controllers, which crun refuses: install runc (Debian: apt-get install runc)';
    const missing = subordinateIdsMissing('/etc/subuid') ?? subordinateIdsMissing('/etc/subgid');
    if (missing)
      return `each replica runs in its own user namespace, and ${missing}: add the line ${SUBORDINATE_USER}:${SUBORDINATE_RANGE} to /etc/subuid and /etc/subgid (./dev does)`;
    return containerStorageUnavailable();
  }
}
