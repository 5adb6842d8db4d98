/**
 * When a container host may remove a directory it built for its replicas to mount (a volume
 * version, a model revision, a deployment's adapters): never while a replica mounts it, and not
 * until it has gone unused for a while, so that a replica started again soon (a restart, a scale
 * up, the next revision of the same deployment) finds it still here instead of fetching gigabytes
 * of weights again.
 *
 * "Last used" is the directory's modification time: each launch that is handed a directory claims
 * it (sets its mtime to now), so does each sweep that finds it mounted, and a sweep takes only
 * directories mounted by no replica whose last use is older than the keep time. Claims and a sweep's decisions take turns (one store, one process: the
 * container host), so a sweep never takes a directory a launch has just been given, and a launch
 * that finds its directory gone builds it again. Hosts sharing a data directory keep each other's
 * files: each one's sweeps mark what its own replicas mount as used, every half keep time.
 */
import { randomBytes } from 'node:crypto';
import { realpath, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';

/** The marker of a directory a sweep took: renamed first, so no launch can find it half removed. */
const REMOVING = '.removing-';

export const isBeingRemoved = (name: string) => name.includes(REMOVING);

export class HostFileUses {
  private turn: Promise<unknown> = Promise.resolve();

  /** Runs `fn` with no claim or sweep decision of this store in between. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.turn.then(fn);
    this.turn = run.catch(() => undefined);
    return run;
  }

  /** Marks `dir` used now; false when it is not there (never built, or swept). */
  claim(dir: string): Promise<boolean> {
    return this.exclusive(async () => {
      const now = new Date();
      return utimes(dir, now, now).then(
        () => true,
        (err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return false;
          throw err;
        },
      );
    });
  }

  /**
   * Removes each of `dirs` that no replica mounts (`inUse`: real paths) and nobody claimed in the
   * last `keepMs`, and each of `leftovers` (what a crash left: half-built or half-removed
   * directories) older than that. Answers the directories removed.
   */
  async sweep(dirs: string[], leftovers: string[], inUse: ReadonlySet<string>, keepMs: number): Promise<string[]> {
    const unusedSince = Date.now() - keepMs;
    const taken = await this.exclusive(async () => {
      const out: Array<{ dir: string; trash: string }> = [];
      for (const dir of dirs) {
        const real = await realpath(dir).catch(() => null);
        if (!real) continue;
        if (mountedWithin(real, inUse)) {
          const now = new Date();
          await utimes(dir, now, now); // in use now: its keep time starts when it is not
          continue;
        }
        const st = await stat(dir);
        if (st.mtimeMs > unusedSince) continue;
        const trash = `${dir}${REMOVING}${randomBytes(6).toString('hex')}`;
        await rename(dir, trash);
        out.push({ dir, trash });
      }
      return out;
    });
    for (const { trash } of taken) await rm(trash, { recursive: true, force: true });
    for (const leftover of leftovers) {
      const st = await stat(leftover).catch(() => null);
      if (st && st.mtimeMs <= unusedSince) await rm(leftover, { recursive: true, force: true });
    }
    return taken.map((t) => t.dir);
  }
}

/** Whether a replica mounts `dir` or a directory inside it. */
function mountedWithin(dir: string, inUse: ReadonlySet<string>): boolean {
  for (const mounted of inUse) if (mounted === dir || mounted.startsWith(dir + path.sep)) return true;
  return false;
}
