/**
 * The networks replicas live on: one Podman bridge per project, so a project's
 * replicas reach each other and nothing else. A replica answers on its
 * published port, but it opens no connection beyond its own bridge:
 *
 * - not to this host (PostgreSQL, Temporal, the API and anything else listening
 *   on the host's addresses: INPUT from the bridge is dropped), and
 * - not through it (other projects' bridges, the docker-compose network where
 *   PostgreSQL and Temporal run, the outside: FORWARD from the bridge is dropped),
 *
 * except the replies of connections made to it (conntrack ESTABLISHED), which is
 * how the gateway and the health checks reach it through the published port, and
 * connections to Gantry's API through the bridge's forwarder (api-forwarder.ts).
 * The rules live in two chains, GANTRY-REPLICAS-IN and GANTRY-REPLICAS-FWD, jumped
 * to first from INPUT and FORWARD of the `mangle` table, which every packet passes
 * before the `filter` table. There Podman's CNI plugin puts its own jump at the top
 * of FORWARD when it sets up its first container, and that chain accepts whatever a
 * container subnet sends: a jump of ours in `filter` was passed over whenever CNI's
 * came later (on a fresh host, one project's replicas reached another's).
 *
 * The same rules hold for IPv6 (ip6tables), but for the forwarder's, which is on
 * an IPv4 address. A bridge has no IPv6 subnet, but a container has a link-local
 * address on it, and so has the host's end of it: without them, anything on the
 * host listening on `::` answered a replica there.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

import { ApiForwarder } from './api-forwarder';
import { PodmanError, SYSTEM_PATH, type PodmanEngine } from './podman-engine';

const run = promisify(execFile);
/** Rules for what replicas send to this host (jumped to from INPUT) and through it (from FORWARD). */
const CHAINS = { INPUT: 'GANTRY-REPLICAS-IN', FORWARD: 'GANTRY-REPLICAS-FWD' } as const;

/** The firewall of each address family: IPv6's where this kernel has IPv6 at all (else it has nothing to filter). */
type Firewall = 'iptables' | 'ip6tables';
const FIREWALLS: Firewall[] = existsSync('/proc/sys/net/ipv6') ? ['iptables', 'ip6tables'] : ['iptables'];

async function iptables(args: string[], table = TABLE, firewall: Firewall = 'iptables'): Promise<boolean> {
  try {
    await run(firewall, ['-w', '-t', table, ...args], { env: { PATH: SYSTEM_PATH } });
    return true;
  } catch {
    return false;
  }
}

/** Where the rules are (see above); earlier versions kept them in `filter`. */
const TABLE = 'mangle';

/** Takes out the chains an earlier version made in `filter` (passed over there, see above). */
async function removeFilterTableChains(): Promise<void> {
  for (const [hook, chain] of Object.entries(CHAINS)) {
    while (await iptables(['-D', hook, '-j', chain], 'filter'));
    await iptables(['-F', chain], 'filter');
    await iptables(['-X', chain], 'filter');
  }
}

/** Adds the rule unless it is there (`-C` answers whether it is). */
async function ensureRule(
  firewall: Firewall,
  where: string,
  position: 'append' | 'first',
  rule: string[],
): Promise<void> {
  if (await iptables(['-C', where, ...rule], TABLE, firewall)) return;
  const added = await iptables(
    position === 'first' ? ['-I', where, '1', ...rule] : ['-A', where, ...rule],
    TABLE,
    firewall,
  );
  if (!added) throw new PodmanError(`could not add the replica firewall rule (${firewall}) ${where} ${rule.join(' ')}`);
}

/** The Podman network of a project's replicas. */
export function projectNetworkName(projectId: string): string {
  return `gantry-${createHash('sha256').update(projectId).digest('hex').slice(0, 16)}`;
}

interface Network {
  /** Its bridge once set up (firewall rules included). */
  ready: Promise<{ bridge: string; forwarder?: ApiForwarder }>;
  /** How many replicas of this host use it. */
  users: number;
}

export class ReplicaNetworks {
  private readonly networks = new Map<string, Network>();
  private chain?: Promise<void>;

  /** `api`: Gantry's API as this host reaches it; replicas reach it through a forwarder on their bridge. */
  constructor(
    private readonly engine: PodmanEngine,
    private readonly api?: { host: string; port: number },
  ) {}

  /**
   * The project's network for one more replica, created (with its firewall rules) on first use,
   * and the API's URL as the replica reaches it. Each acquire is paired with a release when the
   * replica is gone.
   */
  async acquire(projectId: string): Promise<{ network: string; apiUrl?: string }> {
    const name = projectNetworkName(projectId);
    let entry = this.networks.get(name);
    if (!entry) {
      entry = { ready: this.ensure(name, projectId), users: 0 };
      this.networks.set(name, entry);
    }
    entry.users++;
    try {
      const { forwarder } = await entry.ready;
      return {
        network: name,
        apiUrl: forwarder && `http://${forwarder.listenHost}:${forwarder.port}`,
      };
    } catch (err) {
      await this.release(projectId);
      throw err;
    }
  }

  /**
   * A replica of the project is gone: with its last one on this host, the network, its forwarder
   * and its rules go too (Podman hands out at most 256 bridge subnets, and projects come and go).
   */
  async release(projectId: string): Promise<void> {
    const name = projectNetworkName(projectId);
    const entry = this.networks.get(name);
    if (!entry || --entry.users > 0) return;
    this.networks.delete(name);
    const ready = await entry.ready.catch(() => undefined);
    ready?.forwarder?.close();
    // Refused while a container still uses it (one this process does not hold): then it stays.
    const removed = await this.engine.podman(['network', 'rm', name]).then(
      () => true,
      () => false,
    );
    if (removed && ready) {
      for (const firewall of FIREWALLS) {
        for (const [chain, rules] of bridgeRules(firewall, ready.bridge, ready.forwarder)) {
          for (const rule of rules) await iptables(['-D', chain, ...rule], TABLE, firewall);
        }
      }
    }
  }

  private async ensure(name: string, projectId: string): Promise<{ bridge: string; forwarder?: ApiForwarder }> {
    this.chain ??= (async () => {
      await removeFilterTableChains();
      for (const firewall of FIREWALLS) {
        for (const [hook, chain] of Object.entries(CHAINS)) {
          await iptables(['-N', chain], TABLE, firewall); // fails harmlessly when it exists
          await ensureRule(firewall, hook, 'first', ['-j', chain]);
        }
      }
    })();
    await this.chain;
    const exists = () =>
      this.engine.podman(['network', 'exists', name]).then(
        () => true,
        () => false,
      );
    if (!(await exists())) {
      await this.engine
        .podman(['network', 'create', '--disable-dns', '--label', `gantry.project=${projectId}`, name])
        .catch(async (err) => {
          if (!(await exists())) throw err; // else another worker created it meanwhile
        });
    }
    const [bridge, gateway] = (
      await this.engine.podman([
        'network',
        'inspect',
        name,
        '--format',
        '{{.NetworkInterface}} {{range .Subnets}}{{.Gateway}}{{end}}',
      ])
    )
      .trim()
      .split(' ');
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(bridge ?? ''))
      throw new PodmanError(`network ${name} has no bridge (${bridge})`);
    const forwarder = this.api && gateway ? new ApiForwarder(gateway, this.api) : undefined;
    for (const firewall of FIREWALLS) {
      for (const [chain, rules] of bridgeRules(firewall, bridge, forwarder)) {
        for (const rule of rules) await ensureRule(firewall, chain, 'append', rule);
      }
    }
    void forwarder?.start();
    return { bridge, forwarder };
  }
}

/**
 * A bridge's rules, per chain and in order. To this host: replies to connections made to its
 * replicas, and connections to the API forwarder on its gateway address (IPv4); nothing else.
 * Through this host: replies, and traffic between the bridge's own replicas (which crosses FORWARD
 * where br_netfilter is loaded); nothing else.
 */
function bridgeRules(firewall: Firewall, bridge: string, forwarder?: ApiForwarder): Array<[string, string[][]]> {
  const replies = ['-i', bridge, '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'RETURN'];
  const drop = ['-i', bridge, '-j', 'DROP'];
  return [
    [
      CHAINS.INPUT,
      [
        replies,
        ...(forwarder && firewall === 'iptables'
          ? [
              [
                '-i',
                bridge,
                '-d',
                `${forwarder.listenHost}/32`,
                '-p',
                'tcp',
                '--dport',
                String(forwarder.port),
                '-j',
                'RETURN',
              ],
            ]
          : []),
        drop,
      ],
    ],
    [CHAINS.FORWARD, [replies, ['-i', bridge, '-o', bridge, '-j', 'RETURN'], drop]],
  ];
}
