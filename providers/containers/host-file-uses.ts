/**
 * When a container host may remove a directory it built for its replicas to mount (a volume
 * version, a model revision, a deployment's adapters): never while a replica mounts it, and not
 * until it has gone unused for a while, so that a replica started again soon (a restart, a scale
 * up, the next revision of the same deployment) finds it still here instead of fetching gigabytes
 * of weights again.
 *
 * "Last used" is the directory's modification time: each launch that is handed a directory claims
 * it (sets its mtime to now), so does each sweep that finds it mounted, and a sweep takes only
 * directories mounted by no replica whose last use is older than the keep time. Claims and a
 * sweep's decisions take turns (one store, one process: the container host), so a sweep never
 * takes a directory a launch has just been given, and a launch that finds its directory gone
 * builds it again. Hosts sharing a data directory keep each other's
 * files: each one's sweeps mark what its own replicas mount as used, every half keep time.
 */
import { randomBytes } from 'node:crypto';
import { realpath, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';

/** How old a half-built directory must be before it is taken for a crash's leftover. */
const LEFTOVER_MS = 24 * 3600_000;

/** The marker of a directory a sweep took: renamed first, so no launch can find it half removed. */
const REMOVING = '.removing-';

export const isBeingRemoved = (name: string) => name.includes(REMOVING);

/** A directory handed to a launch (or an adapter's build): no sweep takes it until it is released. */
export interface PinnedDir {
  dir: string;
  release(): void;
}

export class HostFileUses {
  private turn: Promise<unknown> = Promise.resolve();
  /** Directories handed out and not yet released, with how many holders each. */
  private readonly pinned = new Map<string, number>();

  /** Runs `fn` with no claim or sweep decision of this store in between. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.turn.then(fn);
    this.turn = run.catch(() => undefined);
    return run;
  }

  /**
   * Marks `dir` used now and pins it until the answer is released; null when it is not there
   * (never built, or swept).
   */
  claim(dir: string): Promise<PinnedDir | null> {
    return this.exclusive(async () => {
      const now = new Date();
      const there = await utimes(dir, now, now).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return false;
          throw err;
        },
      );
      return there ? this.pin(dir) : null;
    });
  }

  /** Pins `dir` (call from within `exclusive`, right after making or claiming it). */
  pin(dir: string): PinnedDir {
    this.pinned.set(dir, (this.pinned.get(dir) ?? 0) + 1);
    let released = false;
    return {
      dir,
      release: () => {
        if (released) return;
        released = true;
        const left = (this.pinned.get(dir) ?? 1) - 1;
        if (left > 0) this.pinned.set(dir, left);
        else this.pinned.delete(dir);
      },
    };
  }

  /**
   * Removes each of `dirs` that no replica mounts (`inUse`: real paths), nobody holds pinned, and
   * nobody claimed in the last `keepMs`, and each of `leftovers` (what a crash left: half-built or
   * half-removed directories) older than that and than a day (a build on another host sharing the
   * directory may stream one large file for hours). Answers the directories removed.
   */
  async sweep(dirs: string[], leftovers: string[], inUse: ReadonlySet<string>, keepMs: number): Promise<string[]> {
    const unusedSince = Date.now() - keepMs;
    const taken = await this.exclusive(async () => {
      const out: Array<{ dir: string; trash: string }> = [];
      for (const dir of dirs) {
        if (this.pinned.has(dir)) continue; // handed to a launch that has not mounted it yet
        const real = await realpath(dir).catch(() => null);
        if (!real) continue;
        if (mountedWithin(real, inUse)) {
          const now = new Date();
          await utimes(dir, now, now); // in use now: its keep time starts when it is not
          continue;
        }
        const st = await stat(dir).catch(() => null); // gone meanwhile (another host's sweep)
        if (!st || st.mtimeMs > unusedSince) continue;
        const trash = `${dir}${REMOVING}${randomBytes(6).toString('hex')}`;
        await rename(dir, trash);
        out.push({ dir, trash });
      }
      return out;
    });
    for (const { trash } of taken) await rm(trash, { recursive: true, force: true });
    const abandonedSince = Math.min(unusedSince, Date.now() - LEFTOVER_MS);
    for (const leftover of leftovers) {
      const st = await stat(leftover).catch(() => null);
      if (st && st.mtimeMs <= abandonedSince) await rm(leftover, { recursive: true, force: true });
    }
    return taken.map((t) => t.dir);
  }
}

/** Whether a replica mounts `dir` or a directory inside it. */
function mountedWithin(dir: string, inUse: ReadonlySet<string>): boolean {
  for (const mounted of inUse) if (mounted === dir || mounted.startsWith(dir + path.sep)) return true;
  return false;
}
