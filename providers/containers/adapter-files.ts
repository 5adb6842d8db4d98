/**
 * Adapters' files on a container host, where a deployment's replicas can read them: each
 * deployment has a directory, mounted read-only into each of its replicas at
 * ADAPTERS_MOUNT_PATH, and an adapter revision attached to it is materialized below it (once per
 * revision, as volume-store.ts does volumes). A replica is told the path it sees, inside its
 * container; under the process runtime, inside its root (GANTRY_MOUNT_ROOT).
 *
 * The directory of every deployment sits in one this user's only (0700), so no other account of
 * the host reaches it; it and what is below are readable by all, for the replicas' own ids.
 *
 * A deployment's directory that no replica of this host has mounted for
 * GANTRY_HOST_FILES_KEEP_SECONDS is removed with what is below it (sweep, host-file-uses.ts).
 */
import { chmod, mkdir, readdir, utimes } from 'node:fs/promises';
import path from 'node:path';

import { ADAPTERS_MOUNT_PATH } from '../../shared/deployments';
import type { BlobStore } from '../storage/blob-store';
import { VolumeStore } from './volume-store';
import { HostFileUses, isBeingRemoved, type PinnedDir } from './host-file-uses';

export class AdapterFiles {
  private readonly uses = new HostFileUses();

  constructor(
    readonly root: string,
    private readonly blobs: BlobStore,
  ) {}

  /**
   * The host directory mounted at ADAPTERS_MOUNT_PATH in the deployment's replicas (made if need
   * be), pinned until the caller releases it.
   */
  async dirOf(deploymentId: string): Promise<PinnedDir> {
    if (!/^[A-Za-z0-9_-]+$/.test(deploymentId)) throw new Error(`unexpected deployment id ${deploymentId}`);
    await mkdir(this.root, { recursive: true });
    await chmod(this.root, 0o700);
    const dir = path.join(this.root, deploymentId);
    // Made (again, if a sweep took it) and claimed in turn with a sweep's decisions.
    return this.uses.exclusive(async () => {
      await mkdir(dir, { recursive: true });
      await chmod(dir, 0o755);
      const now = new Date();
      await utimes(dir, now, now);
      return this.uses.pin(dir);
    });
  }

  /**
   * Removes the directories of deployments no replica of this host mounts (`inUse`, real paths)
   * that were not claimed for `keepMs`; answers those removed.
   */
  async sweep(inUse: ReadonlySet<string>, keepMs: number): Promise<string[]> {
    const names = await readdir(this.root).catch(() => []);
    const dirs = names.filter((n) => !isBeingRemoved(n)).map((n) => path.join(this.root, n));
    const leftovers = names.filter(isBeingRemoved).map((n) => path.join(this.root, n));
    return this.uses.sweep(dirs, leftovers, inUse, keepMs);
  }

  /** Puts an adapter revision's files in the deployment's directory; answers where its replicas see them. */
  async put(
    deploymentId: string,
    revisionId: string,
    files: Array<{ name: string; blob_key: string }>,
  ): Promise<string> {
    // Pinned while the revision is built in it: a sweep must not take the directory from under it.
    const deployment = await this.dirOf(deploymentId);
    try {
      const revision = await new VolumeStore(deployment.dir, this.blobs, 0o755).materialize(revisionId, 1, files);
      revision.release(); // it goes with the deployment's directory, never on its own
      return path.posix.join(ADAPTERS_MOUNT_PATH, ...path.relative(deployment.dir, revision.dir).split(path.sep));
    } finally {
      deployment.release();
    }
  }
}
