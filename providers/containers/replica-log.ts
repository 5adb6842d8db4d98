/**
 * A replica's log file: `<log dir>/<deployment id>/<replica id>.log`, which the
 * replica writes itself (its stdout and stderr) and the API's logs route reads, and
 * `<replica id>.log.1`, what it wrote before the file last outgrew its limit (rotateReplicaLog).
 *
 * The file and its directory are private (0600/0700, the umask of every Gantry
 * process), and they belong to the owner of the log directory. Where the
 * container host runs as root and the API as another user (docker-compose: root
 * for Podman, `node` for the API, with the directory on a volume both mount), the
 * log directory's owner is the API's user, and a root host hands each file to it;
 * otherwise the owner is the host's own user and nothing changes.
 */
import { chownSync, fchownSync, mkdirSync, openSync, statSync } from 'node:fs';
import { chown, copyFile, rename, rm, stat, truncate } from 'node:fs/promises';
import path from 'node:path';

/** Where a container host keeps its replicas' logs, and the API reads them (shared storage across machines). */
export function replicaLogDir(dataDir: string): string {
  return path.join(dataDir, 'deployments');
}

export function replicaLogFile(logDir: string, deploymentId: string, replicaId: string): string {
  return path.join(logDir, deploymentId, `${replicaId}.log`);
}

/** Opens (creating if need be) a replica's log file for appending; answers its descriptor. */
export function openReplicaLog(logDir: string, file: string): number {
  mkdirSync(path.dirname(file), { recursive: true });
  const fd = openSync(file, 'a');
  if (process.getuid?.() === 0) {
    const { uid, gid } = statSync(logDir);
    if (uid !== 0 || gid !== 0) {
      chownSync(path.dirname(file), uid, gid);
      fchownSync(fd, uid, gid);
    }
  }
  return fd;
}

/** Where a replica's log went when it last outgrew its limit. */
export const rotatedLogFile = (file: string): string => `${file}.1`;

/** The copy a rotation is making: there from before the log is truncated until the copy takes `.1`'s place. */
export const rotatingLogFile = (file: string): string => `${rotatedLogFile(file)}.partial`;

/** A rotation's copy not written for this long was left by a host that died rotating. */
export const STALE_ROTATION_MS = 30_000;

/**
 * Keeps a replica's log near `maxBytes` (plus what it writes between two checks): once it is
 * larger, the file is copied to `<file>.1`, replacing the one before, and truncated in place. This
 * is logrotate's "copytruncate": the replica writes through a descriptor of its own, opened for
 * appending, which nothing can point elsewhere; its appends go on at the new end. Lines written
 * during the copy are lost. The copy is whole, so a reader's offset in the file holds in the copy
 * (log-tail.ts). Truncated before the copy takes the old one's place, so a reader that sees the new
 * copy sees the file started again. Answers whether it rotated.
 */
export async function rotateReplicaLog(logDir: string, file: string, maxBytes: number): Promise<boolean> {
  const st = await stat(file).catch(() => null);
  if (!st || st.size <= maxBytes) return false;
  const temp = rotatingLogFile(file);
  try {
    await copyFile(file, temp);
    if (process.getuid?.() === 0) {
      const owner = statSync(logDir);
      if (owner.uid !== 0 || owner.gid !== 0) await chown(temp, owner.uid, owner.gid);
    }
    await truncate(file, 0);
    await rename(temp, rotatedLogFile(file));
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  return true;
}
