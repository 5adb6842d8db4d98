/**
 * Where Gantry's Podman keeps images and containers, and how a replica's disk is bounded.
 *
 * A replica writes into its container's writable layer; unbounded, one tenant could fill the
 * machine's disk for every other. Podman's own `--storage-opt size=` needs the overlay driver on
 * XFS with project quotas, which not every kernel has (CONFIG_XFS_QUOTA; ext4's project quotas need
 * CONFIG_QFMT_V2), and Podman 4.3 hands the option to the driver store-wide, where its btrfs
 * driver refuses it. So:
 *
 * - Podman's storage is a btrfs filesystem with quotas (STORE.mount), used through Podman's `btrfs`
 *   driver: each container's writable layer is a subvolume of its own, and an OCI hook
 *   (writable-layer-hook.mjs) limits a replica's subvolume to its `storage` before its process
 *   starts, as a quota on the bytes the subvolume holds alone. A write past it fails inside the
 *   container with EDQUOT.
 * - The filesystem is bounded: images, writable layers and pulls in progress (image_copy_tmp_dir)
 *   all live on it, so together they never take more of the machine than its size. A machine
 *   without one gets a sparse image file of GANTRY_CONTAINER_STORAGE_GIB (STORE.image),
 *   loop-mounted; an operator may instead mount a btrfs filesystem of a disk of its own at
 *   STORE.mount, which is then used as it is.
 * - One per machine, as /var/lib/containers is Podman's: the sweeps of what Podman leaves behind
 *   (orphaned-port-forwards.ts, orphaned-address-leases.ts) take a container their store does not
 *   know for gone, so every Gantry process of a machine must share one store.
 * - A machine that cannot have it (no btrfs in its kernel, no loop device, no btrfs-progs) does not
 *   run the podman runtime at all: the container host refuses to start and says why, rather than
 *   run replicas whose `storage` nothing enforces.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export const STORE = {
  /** The btrfs filesystem Podman's storage is on (the graph root is a folder of it). */
  mount: '/var/lib/gantry-containers/storage',
  /** The filesystem's image file, when the machine had none and Gantry made it. */
  image: '/var/lib/gantry-containers/storage.btrfs',
  /** Held while a process mounts the filesystem, so that two never make or mount it at once. */
  lock: '/var/lib/gantry-containers/storage.lock',
  /** Podman's run root for this store: state a reboot is to clear, apart from the default store's. */
  runRoot: '/run/gantry-containers',
  /**
   * The names of the container hosts that run on this machine, and so use this store, now
   * (host-identity.ts): cleared by a reboot, as the containers are.
   */
  liveHosts: '/run/gantry-container-hosts',
};
export const GRAPH_ROOT = path.join(STORE.mount, 'graph');
/** Where a pull writes what it downloads before unpacking it: on the bounded filesystem too. */
export const PULL_TMP_DIR = path.join(STORE.mount, 'tmp');

/** The annotation that carries a replica's writable-layer limit, in bytes, to the hook. */
export const WRITABLE_LAYER_ANNOTATION = 'gantry.writable-layer-bytes';
const HOOK_SCRIPT = path.join(__dirname, 'writable-layer-hook.mjs');

/** Gantry's storage.conf (CONTAINERS_STORAGE_CONF). */
export function storageConf(): string {
  return [
    '# Written by Gantry (providers/containers/podman/container-storage.ts); rewritten at each start.',
    '[storage]',
    'driver = "btrfs"',
    `graphroot = "${GRAPH_ROOT}"`,
    `runroot = "${STORE.runRoot}"`,
    '',
  ].join('\n');
}

/** The OCI hook configuration (oci-hooks(5)) that limits every container carrying the annotation. */
export function writableLayerHook(): string {
  return JSON.stringify({
    version: '1.0.0',
    hook: { path: process.execPath, args: [process.execPath, HOOK_SCRIPT] },
    when: { annotations: { [`^${WRITABLE_LAYER_ANNOTATION.replace(/\./g, '\\.')}$`]: '.*' } },
    stages: ['prestart'],
  });
}

/**
 * Mounts the store's filesystem unless it is mounted (making its image file first if there is
 * none), and turns its quotas on. Run under `flock`, so the Gantry processes of a machine that
 * start together make and mount it once. Arguments: image file, mount point, size in bytes.
 */
const PREPARE = `
set -eu
image=$1 mount=$2 bytes=$3
mkdir -p "$mount"
if ! mountpoint -q "$mount"; then
  if [ ! -e "$image" ]; then
    truncate -s "$bytes" "$image.new"
    mkfs.btrfs -q -f "$image.new"
    mv "$image.new" "$image"
  fi
  mount -o loop,discard=async "$image" "$mount"
fi
kind=$(stat -f -c %T "$mount")
if [ "$kind" != btrfs ]; then echo "$mount is a $kind filesystem, not btrfs" >&2; exit 1; fi
btrfs quota enable "$mount"
mkdir -p "$mount/graph" "$mount/tmp"
`;

/** Mounts Gantry's container storage (see the file's comment); fails saying why it cannot. */
export async function prepareContainerStorage(sizeGiB: number): Promise<void> {
  mkdirSync(path.dirname(STORE.lock), { recursive: true });
  const bytes = String(Math.ceil(sizeGiB * 1024 ** 3));
  try {
    await run(
      'flock',
      ['--exclusive', '--timeout', '300', STORE.lock, 'sh', '-c', PREPARE, 'sh', STORE.image, STORE.mount, bytes],
      { env: { PATH: SYSTEM_PATH }, timeout: 360_000 },
    );
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `Gantry's container storage, a btrfs filesystem with quotas at ${STORE.mount}, could not be set up: ` +
        `${(e.stderr || e.message).trim().split('\n').slice(-3).join(' ')}`,
    );
  }
}

/** Why this machine cannot have Gantry's container storage, or undefined when it can try. */
export function containerStorageUnavailable(): string | undefined {
  const filesystems = readFileSync('/proc/filesystems', 'utf8');
  if (!/\bbtrfs$/m.test(filesystems))
    return `its kernel has no btrfs, the filesystem of Gantry's container storage, whose quotas bound each replica's disk`;
  const onPath = (tool: string) => SYSTEM_PATH.split(':').some((dir) => existsSync(path.join(dir, tool)));
  for (const tool of ['btrfs', 'mkfs.btrfs', 'flock', 'mountpoint'])
    if (!onPath(tool))
      return `${tool} is not installed (Debian: apt-get install btrfs-progs util-linux); Gantry's container storage needs it`;
  return undefined;
}
