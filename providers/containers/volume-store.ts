/**
 * Volume content on a container host: each version of a deployment volume is
 * materialized once, from the blob store, into its own read-only directory
 * (`<root>/<volume id>/v<version>`), which replicas then mount. Built under a
 * temporary name and renamed when complete, so a replica never sees half a
 * version and two launches racing build it at most twice, never mixed.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { BlobStore } from '../storage/blob-store';

/** A path inside a volume: relative segments of ordinary characters, nothing hidden, nothing that climbs. */
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._ +=@-]{0,254}$/;

export function isSafeVolumePath(name: string): boolean {
  const segments = name.split('/');
  return name.length <= 1024 && segments.every((s) => SEGMENT.test(s) && s !== '..' && !s.endsWith('.'));
}

export class VolumeStore {
  constructor(
    readonly root: string,
    private readonly blobs: BlobStore,
  ) {}

  /**
   * The directory holding a file set (a volume's version, or a model revision), building it
   * first if this host has not. `name` is each file's path inside it.
   */
  async materialize(
    volumeId: string,
    version: number,
    files: Array<{ name: string; blob_key: string }>,
  ): Promise<string> {
    if (!/^[A-Za-z0-9_-]+$/.test(volumeId)) throw new Error(`unexpected volume id ${volumeId}`);
    const dir = path.join(this.root, volumeId, `v${version}`);
    if (existsSync(dir)) return dir;
    const temp = `${dir}.partial-${randomBytes(6).toString('hex')}`;
    try {
      for (const f of files) {
        if (!isSafeVolumePath(f.name)) throw new Error(`volume file name ${JSON.stringify(f.name)} is not a safe path`);
        const target = path.resolve(temp, f.name);
        if (!target.startsWith(temp + path.sep)) throw new Error(`volume file ${f.name} escapes its directory`);
        await mkdir(path.dirname(target), { recursive: true });
        await pipeline(this.blobs.read(f.blob_key), createWriteStream(target, { flags: 'wx', mode: 0o444 }));
      }
      // Files are read-only (0444); directories stay writable by the host, so it can clean up.
      await mkdir(temp, { recursive: true });
      await rename(temp, dir);
    } catch (err) {
      await rm(temp, { recursive: true, force: true });
      // Another launch finished the same version first: theirs is as good as ours.
      if (existsSync(dir)) return dir;
      throw err;
    }
    return dir;
  }
}
