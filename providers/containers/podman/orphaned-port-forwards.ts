/**
 * The port forwards of replica containers that are gone.
 *
 * Podman (4.3, with CNI) now and then removes a container without tearing down its network: the
 * event log shows it `died` and `remove`d with no network cleanup between, and CNI's rules for it
 * stay in the `nat` table. Seen in Gantry's tests: 3 of the 12 containers of one run of
 * podman-isolation.test.ts, none in the next; podman#11384 and #10806 describe the same leftovers.
 * The harm is the port forward: every connection to the replica's host port is sent on (DNAT) to
 * the address the container had on its bridge. A later listener on that port (another replica,
 * whose host port is any free port, or any process) is then unreachable through it, or worse,
 * reaches whatever container holds that bridge address now. A test API server that happened to
 * listen on such a port was refused every connection.
 *
 * So after each replica exits, and when a host starts, the CNI rules of Gantry's replica networks
 * whose container Podman no longer knows are taken out (and their chains). Only `gantry-` networks
 * are looked at: another CNI user's rules on this host are none of ours. The rules are read before
 * Podman's list of containers, so a container created in between is never taken for gone.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { SYSTEM_PATH, type PodmanEngine } from './podman-engine';

const run = promisify(execFile);

/**
 * CNI's comment on a container's rules: `name: "<network>" id: "<container id>"` (the bridge
 * plugin's masquerade rules) or `dnat name: ...` (the portmap plugin's), as `iptables -S` prints it.
 */
const CNI_COMMENT = /--comment "(?:dnat )?name: \\"(gantry-[0-9a-f]{16})\\" id: \\"([0-9a-f]{64})\\""/;
/** The chain a commented rule jumps to: the container's own (CNI-<hash> or CNI-DN-<hash>). */
const OWN_CHAIN = / -j (CNI-(?:DN-)?[0-9a-f]+)$/;

export interface OrphanedForwards {
  /** The containers whose rules are left, by id. */
  containers: string[];
  /** An iptables-restore script (for `--noflush`) that deletes their rules and chains. */
  script: string;
}

/**
 * From `iptables -t nat -S` and the ids of the containers Podman knows: the rules of Gantry's
 * replica networks that belong to no container, and the script that deletes them.
 */
export function orphanedForwards(natRules: string, liveContainers: ReadonlySet<string>): OrphanedForwards {
  const containers = new Set<string>();
  const jumps: string[] = [];
  const chains = new Set<string>();
  for (const line of natRules.split('\n')) {
    if (!line.startsWith('-A ')) continue;
    const owner = CNI_COMMENT.exec(line);
    if (!owner || liveContainers.has(owner[2])) continue;
    const chain = OWN_CHAIN.exec(line)?.[1];
    // The rules inside a container's own chain carry the comment too; the chain goes whole below.
    if (chain && !line.startsWith(`-A ${chain} `)) {
      containers.add(owner[2]);
      jumps.push(line.replace(/^-A /, '-D '));
      chains.add(chain);
    }
  }
  const script = jumps.length
    ? ['*nat', ...jumps, ...[...chains].flatMap((c) => [`-F ${c}`, `-X ${c}`]), 'COMMIT', ''].join('\n')
    : '';
  return { containers: [...containers], script };
}

/**
 * Takes out the leftover port forwards (see above); answers the containers they were left by.
 * Another container host on this machine may take out the same rules meanwhile: then the whole
 * deletion is refused, and it looks again.
 */
export async function removeOrphanedForwards(engine: PodmanEngine): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    const orphans = await findOrphanedForwards(engine);
    if (!orphans.script) return [];
    try {
      await new Promise<void>((resolve, reject) => {
        const restore = execFile('iptables-restore', ['-w', '--noflush'], { env: { PATH: SYSTEM_PATH } }, (err) =>
          err ? reject(err) : resolve(),
        );
        restore.stdin?.end(orphans.script);
      });
      return orphans.containers;
    } catch (err) {
      if (attempt === 3) throw err;
    }
  }
}

async function findOrphanedForwards(engine: PodmanEngine): Promise<OrphanedForwards> {
  // The rules first, then the containers: a rule read belongs to a container that existed then.
  const { stdout: natRules } = await run('iptables', ['-w', '-t', 'nat', '-S'], {
    env: { PATH: SYSTEM_PATH },
    maxBuffer: 64 << 20,
  });
  if (!natRules.includes('name: \\"gantry-')) return { containers: [], script: '' };
  const ids = await engine.podman(['ps', '--all', '--no-trunc', '--format', '{{.ID}}']);
  return orphanedForwards(natRules, new Set(ids.split('\n').filter(Boolean)));
}
