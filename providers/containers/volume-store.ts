/**
 * Volume content on a container host: each version of a deployment volume is
 * materialized once, from the blob store, into its own read-only directory
 * (`<root>/<volume id>/v<version>`), which replicas then mount. Built under a
 * temporary name and renamed when complete, so a replica never sees half a
 * version and two launches racing build it at most twice, never mixed.
 *
 * Modes: a version's tree is readable by every user (directories 0755, files
 * 0444), whatever the process's umask, because a podman replica reads it as an
 * unprivileged id of its own user namespace. Its parents stay this user's only
 * (0700; the store's root is too), so no other account of the host reaches it:
 * only the replicas it is mounted into see it.
 *
 * A version no replica of this host has mounted for GANTRY_HOST_FILES_KEEP_SECONDS is removed
 * (sweep, host-file-uses.ts); a launch that wants it again builds it again.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, readdir, rename, rm, rmdir, utimes } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { BlobStore } from '../storage/blob-store';
import { HostFileUses, isBeingRemoved, type PinnedDir } from './host-file-uses';

/** A path inside a volume: relative segments of ordinary characters, nothing hidden, nothing that climbs. */
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._ +=@-]{0,254}$/;

export function isSafeVolumePath(name: string): boolean {
  const segments = name.split('/');
  return name.length <= 1024 && segments.every((s) => SEGMENT.test(s) && s !== '..' && !s.endsWith('.'));
}

const VERSION_DIR = /^v\d+$/;
const PARTIAL = '.partial-';

export class VolumeStore {
  private readonly uses = new HostFileUses();
  /** Versions this process is building now (never swept as leftovers, however long a download takes). */
  private readonly building = new Set<string>();

  /**
   * `parentMode`: of each version's parent directory. 0700 where a version is mounted on its own
   * (volumes, model revisions); 0755 where the whole store is mounted (adapter-files.ts), so a
   * replica can reach the versions below.
   */
  constructor(
    readonly root: string,
    private readonly blobs: BlobStore,
    private readonly parentMode: 0o700 | 0o755 = 0o700,
  ) {}

  /**
   * The directory holding a file set (a volume's version, or a model revision), building it
   * first if this host has not. `name` is each file's path inside it. It is pinned (no sweep takes
   * it) until the caller releases it: once the replica it is for has mounted it, or failed to.
   */
  async materialize(
    volumeId: string,
    version: number,
    files: Array<{ name: string; blob_key: string }>,
  ): Promise<PinnedDir> {
    if (!/^[A-Za-z0-9_-]+$/.test(volumeId)) throw new Error(`unexpected volume id ${volumeId}`);
    const dir = path.join(this.root, volumeId, `v${version}`);
    const existing = await this.uses.claim(dir);
    if (existing) return existing;
    const temp = `${dir}${PARTIAL}${randomBytes(6).toString('hex')}`;
    this.building.add(temp);
    try {
      // In turn with a sweep, which removes a volume's directory once it holds no version.
      await this.uses.exclusive(async () => {
        await mkdir(path.dirname(dir), { recursive: true });
        await chmod(path.dirname(dir), this.parentMode);
      });
      for (const f of files) {
        if (!isSafeVolumePath(f.name)) throw new Error(`volume file name ${JSON.stringify(f.name)} is not a safe path`);
        const target = path.resolve(temp, f.name);
        if (!target.startsWith(temp + path.sep)) throw new Error(`volume file ${f.name} escapes its directory`);
        await mkdir(path.dirname(target), { recursive: true });
        await pipeline(this.blobs.read(f.blob_key), createWriteStream(target, { flags: 'wx', mode: 0o444 }));
      }
      await mkdir(temp, { recursive: true });
      await readableByReplicas(temp);
      // Claimed as it appears: a long download must not leave it looking long unused.
      return await this.uses.exclusive(async () => {
        await rename(temp, dir);
        const now = new Date();
        await utimes(dir, now, now);
        return this.uses.pin(dir);
      });
    } catch (err) {
      await rm(temp, { recursive: true, force: true });
      // Another launch finished the same version first: theirs is as good as ours.
      const theirs = await this.uses.claim(dir);
      if (theirs) return theirs;
      throw err;
    } finally {
      this.building.delete(temp);
    }
  }

  /**
   * Removes the versions no replica mounts (`inUse`, real paths) that no launch has claimed for
   * `keepMs`, and what a crash left half built or half removed; answers the versions removed.
   */
  async sweep(inUse: ReadonlySet<string>, keepMs: number): Promise<string[]> {
    const versions: string[] = [];
    const leftovers: string[] = [];
    const sets = await readdir(this.root).catch(() => []);
    for (const set of sets) {
      for (const name of await readdir(path.join(this.root, set)).catch(() => [])) {
        const entry = path.join(this.root, set, name);
        if (VERSION_DIR.test(name)) versions.push(entry);
        else if ((name.includes(PARTIAL) && !this.building.has(entry)) || isBeingRemoved(name)) leftovers.push(entry);
      }
    }
    const removed = await this.uses.sweep(versions, leftovers, inUse, keepMs);
    // A volume with no version left here goes too, unless a build in it began meanwhile.
    for (const set of sets) {
      const dir = path.join(this.root, set);
      await this.uses.exclusive(async () => {
        if (![...this.building].some((b) => path.dirname(b) === dir)) await rmdir(dir).catch(() => undefined);
      });
    }
    return removed;
  }
}

/**
 * Files read-only for all (0444); directories readable and searchable by all, and writable by
 * this user only, so the host can clean up (0755). Set explicitly: the umask (077) masks modes given at creation.
 */
async function readableByReplicas(root: string): Promise<void> {
  await chmod(root, 0o755);
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    await chmod(path.join(entry.parentPath, entry.name), entry.isDirectory() ? 0o755 : 0o444);
  }
}
