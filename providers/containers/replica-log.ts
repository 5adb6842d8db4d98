/**
 * A replica's log file: `<log dir>/<deployment id>/<replica id>.log`, which the
 * replica writes itself (its stdout and stderr) and the API's logs route reads.
 *
 * The file and its directory are private (0600/0700, the umask of every Gantry
 * process), and they belong to the owner of the log directory. Where the
 * container host runs as root and the API as another user (docker-compose: root
 * for Podman, `node` for the API, with the directory on a volume both mount), the
 * log directory's owner is the API's user, and a root host hands each file to it;
 * otherwise the owner is the host's own user and nothing changes.
 */
import { chownSync, fchownSync, mkdirSync, openSync, statSync } from 'node:fs';
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
