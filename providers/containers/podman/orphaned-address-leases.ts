/**
 * The bridge addresses CNI still holds for replica containers that are gone.
 *
 * When Podman removes a container without tearing down its network (see orphaned-port-forwards.ts
 * for when), CNI's host-local IPAM keeps the container's address leased: a file named by the
 * address under /var/lib/cni/networks/<network>/, holding the container's id. Nothing ever frees it.
 * The file outlives the network too (`podman network rm` leaves the folder), and a project's network
 * has the same name each time it is made (replica-networks.ts), so the lease comes back with it. A
 * project's bridge is a /24: after some 250 such leftovers its replicas get no address, and fail to
 * start. CNI's cached result for the container (/var/lib/cni/results/<network>-<id>-<interface>)
 * stays as well; it holds nothing, but it is the same leftover.
 *
 * So the same sweep takes them out: the leases and cached results of Gantry's replica networks
 * (`gantry-<16 hex>`) whose container Podman no longer knows. The files are read before Podman's
 * list of containers, so a container created in between is never taken for gone. host-local
 * takes an address by creating its file and frees it by deleting it; a leftover's file is deleted
 * here the same way, without host-local's lock, since nothing else writes a file of a container
 * that is gone.
 */
import { readFile, readdir, unlink } from 'node:fs/promises';
import { isIP } from 'node:net';
import path from 'node:path';
import type { PodmanEngine } from './podman-engine';

/** Where CNI keeps its state: host-local's default data directory and libcni's result cache. */
export const CNI_STATE = { leases: '/var/lib/cni/networks', results: '/var/lib/cni/results' };

const GANTRY_NETWORK = /^gantry-[0-9a-f]{16}$/;
/** A cached result's name: `<network>-<container id>-<interface>`. */
const CACHED_RESULT = /^(gantry-[0-9a-f]{16})-([0-9a-f]{64})-[^/]+$/;

/** A file CNI keeps for one container: a lease or a cached result. */
export interface ContainerFile {
  path: string;
  container: string;
}

/** The files of gone containers among `files`, given the ids of the containers Podman knows. */
export function orphanedLeases(files: ContainerFile[], liveContainers: ReadonlySet<string>): ContainerFile[] {
  return files.filter((f) => !liveContainers.has(f.container));
}

/** The leases and cached results of Gantry's replica networks, with the container each is for. */
export async function containerFiles(state = CNI_STATE): Promise<ContainerFile[]> {
  const files: ContainerFile[] = [];
  for (const network of (await entries(state.leases)).filter((n) => GANTRY_NETWORK.test(n))) {
    const dir = path.join(state.leases, network);
    // A lease is named by its address; `lock` and `last_reserved_ip.0` are host-local's own.
    for (const address of (await entries(dir)).filter((n) => isIP(n))) {
      const lease = path.join(dir, address);
      const container = (await readFile(lease, 'utf8').catch(() => '')).split('\n')[0].trim();
      if (/^[0-9a-f]{64}$/.test(container)) files.push({ path: lease, container });
    }
  }
  for (const name of await entries(state.results)) {
    const cached = CACHED_RESULT.exec(name);
    if (cached) files.push({ path: path.join(state.results, name), container: cached[2] });
  }
  return files;
}

/**
 * Deletes the leases and cached results left for containers that are gone (see above); answers
 * those containers. A file already gone (Podman's own teardown, or another host's sweep, came
 * first) is no failure.
 */
export async function removeOrphanedLeases(engine: PodmanEngine, state = CNI_STATE): Promise<string[]> {
  const files = await containerFiles(state);
  if (!files.length) return [];
  const ids = await engine.podman(['ps', '--all', '--no-trunc', '--format', '{{.ID}}']);
  const orphans = orphanedLeases(files, new Set(ids.split('\n').filter(Boolean)));
  await Promise.all(
    orphans.map((f) =>
      unlink(f.path).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      }),
    ),
  );
  return [...new Set(orphans.map((f) => f.container))];
}

/** A directory's entries; none when it does not exist (no CNI network was ever made here). */
async function entries(dir: string): Promise<string[]> {
  return readdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [];
    throw err;
  });
}
