/**
 * Attack: reaching the container host over IPv6. A replica's network is its
 * project's bridge, firewalled for IPv4 (replica-networks.ts); but a container
 * also has an IPv6 link-local address on that bridge, and so has the host's
 * end of it, where anything listening on `::` (every address, IPv6 and IPv4)
 * answers unless IPv6 is filtered too.
 *
 * The attacker has one ordinary project key and deploys two replicas that
 * listen on `::` (HOST=::). From one, through the gateway's /connect probe, it
 * tries a service of the host on `::` at the bridge's own link-local address
 * and at the host's other IPv6 addresses, and fails. Beside each "cannot", a
 * "can": the same probe reaches its own replica over IPv6 (loopback and
 * link-local) and the other replica of its project across the bridge, and the
 * host reaches its service at the very address the replica tried.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { after, before, test } from 'node:test';

import { projectNetworkName } from '../../providers/containers/podman/replica-networks';
import { eventually } from '../helpers/platform';
import { startPodmanPlatform, type PodmanPlatform } from '../helpers/podman-platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let host: PodmanPlatform;
let attacker: Tenant;
/** A service on every address of this host, IPv6 and IPv4, as PostgreSQL or Temporal may be. */
let hostService: Server;
let hostServicePort: number;

before(async () => {
  host = await startPodmanPlatform();
  attacker = await createTenant(host.p.db);
  hostService = createServer((s) => s.on('error', () => undefined).end('hello\n'));
  await new Promise<void>((resolve) => hostService.listen({ port: 0, host: '::', ipv6Only: false }, resolve));
  hostServicePort = (hostService.address() as { port: number }).port;
});
after(async () => {
  hostService?.close();
  await host?.stop();
});

/** The IPv6 addresses /proc/net/if_inet6 lists (its own view of a network namespace), by interface. */
function ipv6Addresses(file: string): Array<{ address: string; device: string; tentative: boolean }> {
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [hex, , , , flags, device] = line.trim().split(/\s+/);
      const address = hex.match(/.{4}/g)!.join(':');
      return { address, device, tentative: (parseInt(flags, 16) & 0x40) !== 0 };
    });
}
/** A replica's link-local address on its eth0, once its duplicate address detection is done. */
async function linkLocalOf(replicaId: string): Promise<string> {
  const pid = host.podman(['inspect', `gantry-${replicaId}`, '--format', '{{.State.Pid}}']).trim();
  const found = await eventually(
    async () => ipv6Addresses(`/proc/${pid}/net/if_inet6`).find((a) => a.device === 'eth0' && /^fe80/.test(a.address)),
    (a) => a !== undefined && !a.tentative,
  );
  return found!.address;
}
const connectFrom = async (name: string, address: string, port: number) =>
  (await host.viaGateway(attacker.key, name, `/connect?host=${encodeURIComponent(address)}&port=${port}`)).text;
/** Whether this host itself connects to `address` (a link-local one with its zone: `fe80::…%bridge`). */
const hostConnects = (address: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ host: address, port });
    socket.setTimeout(1000, () => (socket.destroy(), resolve(false)));
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

test("a replica reaches none of the host's IPv6 addresses, and its own project's replicas over IPv6", async () => {
  const onIpv6 = { environment_variables: [{ name: 'HOST', value: '::' }] };
  const probe = await host.deploy(attacker.key, 'probe', onIpv6);
  const peer = await host.deploy(attacker.key, 'peer', onIpv6);
  const replicaOf = async (deploymentId: string) =>
    (
      await host.p.db.query<{ replica_id: string }>(
        `SELECT replica_id FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
        [deploymentId],
      )
    ).rows[0].replica_id;
  const [probeReplica, peerReplica] = [await replicaOf(probe.id), await replicaOf(peer.id)];

  // The probe speaks IPv6: to itself, on loopback and on its link-local address, and to its peer
  // across the bridge (the way to the host's end of it).
  assert.equal(await connectFrom('probe', '::1', 8080), 'connected');
  assert.equal(await connectFrom('probe', `${await linkLocalOf(probeReplica)}%eth0`, 8080), 'connected');
  assert.equal(await connectFrom('probe', `${await linkLocalOf(peerReplica)}%eth0`, 8080), 'connected');

  // The bridge's own link-local address: the host's service answers there, to the host.
  const bridge = host.podman([
    'network',
    'inspect',
    projectNetworkName(attacker.projectId),
    '--format',
    '{{.NetworkInterface}}',
  ]);
  const gateway = await eventually(
    async () => ipv6Addresses('/proc/net/if_inet6').find((a) => a.device === bridge.trim() && /^fe80/.test(a.address)),
    (a) => a !== undefined && !a.tentative,
  );
  assert.ok(await hostConnects(`${gateway!.address}%${bridge.trim()}`, hostServicePort), 'the host reaches it');
  assert.notEqual(
    await connectFrom('probe', `${gateway!.address}%eth0`, hostServicePort),
    'connected',
    "the host's service on its bridge's link-local address, from a replica",
  );
  // Nor any other IPv6 address of the host.
  const hostAddresses = Object.values(networkInterfaces())
    .flat()
    .filter((i) => i && i.family === 'IPv6' && !i.internal && !i.address.startsWith('fe80'))
    .map((i) => i!.address);
  for (const address of hostAddresses) {
    assert.ok(await hostConnects(address, hostServicePort), `the host reaches its service on ${address}`);
    assert.notEqual(await connectFrom('probe', address, hostServicePort), 'connected', address);
  }
});
