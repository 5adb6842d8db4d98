/**
 * What Podman leaves on the network for a replica container that is gone, on real Podman, CNI and
 * iptables: port forwards (providers/containers/podman/orphaned-port-forwards.ts) and bridge address
 * leases (orphaned-address-leases.ts).
 *
 * Podman leaves them now and then, when a container is removed without its network torn down;
 * that cannot be caused on purpose. So the tests make the same state from real parts: CNI's own
 * rules and lease for a replica container, read while it ran, put back after Podman removed the
 * container and them. With the rules back, a listener on the old host port gets none of its
 * connections; with the lease back, a network with room for one container has none for the next.
 * After the sweep both work again, and a running replica's forward and lease are left as they were.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, isIP, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PodmanEngine, SYSTEM_PATH } from '../../providers/containers/podman/podman-engine';
import { CNI_STATE, removeOrphanedLeases } from '../../providers/containers/podman/orphaned-address-leases';
import { removeOrphanedForwards } from '../../providers/containers/podman/orphaned-port-forwards';
import { projectNetworkName } from '../../providers/containers/podman/replica-networks';
import { freePort } from '../../platform/ports';
import { buildExampleImage } from '../../scripts/build-example-images';

const iptables = (...args: string[]) =>
  execFileSync('iptables', ['-w', '-t', 'nat', ...args], { encoding: 'utf8', env: { PATH: SYSTEM_PATH } });
const restore = (script: string) =>
  execFileSync('iptables-restore', ['-w', '--noflush'], { input: script, env: { PATH: SYSTEM_PATH } });

/** The nat rules CNI made for container `id`: its commented jumps and its own chains, whole. */
function rulesOf(id: string): { chains: string[]; rules: string[] } {
  const jumps = iptables('-S')
    .split('\n')
    .filter((l) => l.startsWith('-A ') && l.includes(`id: \\"${id}\\"`) && / -j CNI-/.test(l));
  const chains = jumps.map((l) => / -j (CNI-\S+)$/.exec(l)![1]);
  const inside = chains.flatMap((c) =>
    iptables('-S', c)
      .split('\n')
      .filter((l) => l.startsWith('-A ')),
  );
  return { chains, rules: [...inside, ...jumps] };
}

/** Whether a connection to 127.0.0.1:`port` reaches `server` within `ms`. */
function reaches(server: Server, port: number, ms = 1500): Promise<boolean> {
  return new Promise((resolve) => {
    const onConnection = () => finish(true);
    server.once('connection', onConnection);
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined); // refused or unreachable: the timer answers
    const timer = setTimeout(() => finish(false), ms);
    function finish(reached: boolean) {
      clearTimeout(timer);
      server.off('connection', onConnection);
      socket.destroy();
      resolve(reached);
    }
  });
}

describe('what Podman left on the network for replica containers that are gone', () => {
  const engine = new PodmanEngine(mkdtempSync(path.join(tmpdir(), 'gantry-podman-')));
  const network = projectNetworkName(`orphaned-forwards-${randomBytes(4).toString('hex')}`);
  const suffix = randomBytes(4).toString('hex');
  const names = { gone: `gantry-orphan-gone-${suffix}`, live: `gantry-orphan-live-${suffix}` };
  let image: string;

  const runReplica = async (name: string, port: number) =>
    (
      await engine.podman([
        'run',
        '--detach',
        '--name',
        name,
        '--network',
        network,
        '--publish',
        `127.0.0.1:${port}:8080`,
        '--env',
        'PORT=8080',
        '--env',
        'HOST=0.0.0.0',
        image,
      ])
    ).trim();

  before(async () => {
    // A tag of its own: the shared example tag is removed by other files once they pushed it.
    image = await buildExampleImage(engine, 'http-replica', `localhost/gantry-test/orphaned-forwards-${suffix}:1`);
    await engine.podman(['network', 'create', '--disable-dns', network]);
  });
  /** The container whose rules the test puts back: its rules go in `after` whatever the test did. */
  let goneId = '';
  after(async () => {
    const { chains, rules } = goneId ? rulesOf(goneId) : { chains: [], rules: [] };
    const jumps = rules.filter((l) => !chains.some((c) => l.startsWith(`-A ${c} `)));
    if (jumps.length)
      restore(
        [
          '*nat',
          ...jumps.map((l) => l.replace(/^-A /, '-D ')),
          ...chains.flatMap((c) => [`-F ${c}`, `-X ${c}`]),
          'COMMIT',
          '',
        ].join('\n'),
      );
    await engine.podman(['rm', '--force', '--ignore', names.gone, names.live]).catch(() => undefined);
    await engine.podman(['network', 'rm', network]).catch(() => undefined);
    if (image) await engine.podman(['rmi', '--ignore', image]).catch(() => undefined);
    rmSync(path.dirname(engine.confFile), { recursive: true, force: true });
  });

  test("address leases are taken out, freeing the gone container's bridge address, so its network has room for a replica again", async () => {
    // A /30: one address for containers, so one leftover lease fills the network.
    const small = projectNetworkName(`orphaned-leases-${suffix}`);
    const leases = path.join(CNI_STATE.leases, small);
    const subnet = `10.251.${randomBytes(1)[0]}.${(randomBytes(1)[0] % 64) * 4}/30`;
    await engine.podman(['network', 'create', '--disable-dns', '--subnet', subnet, small]);
    const run = (name: string) =>
      engine.podman(['run', '--detach', '--name', name, '--network', small, '--env', 'PORT=8080', image]);
    const [first, second] = [`gantry-lease-first-${suffix}`, `gantry-lease-second-${suffix}`];
    try {
      const firstId = (await run(first)).trim();
      const [address] = readdirSync(leases).filter((f) => isIP(f));
      const lease = readFileSync(path.join(leases, address), 'utf8');
      assert.ok(lease.startsWith(firstId), `the lease names the container: ${lease}`);

      // Podman removes the container and frees its address; then the lease is back, as a removal
      // that skipped the network teardown leaves it.
      await engine.podman(['rm', '--force', first]);
      assert.ok(!existsSync(path.join(leases, address)), 'Podman freed the address');
      // Another container host on this machine (a file beside this one) may free it first: then it
      // is put back and tried again.
      let full = false;
      for (let attempt = 0; attempt < 5 && !full; attempt++) {
        writeFileSync(path.join(leases, address), lease);
        full = await run(second).then(
          () => false,
          (err: Error) => /no IP addresses available/.test(err.message),
        );
        if (!full) await engine.podman(['rm', '--force', '--ignore', second]);
      }
      assert.ok(full, 'with the leftover lease, the network has no address for another container');

      // This sweep must be the one that frees it: when a host beside this one got there first, the
      // lease is put back and swept again.
      let freed = await removeOrphanedLeases(engine);
      for (let attempt = 0; attempt < 5 && !freed.includes(firstId); attempt++) {
        writeFileSync(path.join(leases, address), lease);
        freed = await removeOrphanedLeases(engine);
      }
      assert.ok(freed.includes(firstId), `this sweep freed the gone container's lease: ${freed.join(', ')}`);
      assert.ok(!existsSync(path.join(leases, address)), 'the leftover lease is gone');
      await engine.podman(['rm', '--force', '--ignore', second]); // the failed run's container
      const secondId = (await run(second)).trim();
      assert.ok(readFileSync(path.join(leases, address), 'utf8').startsWith(secondId), 'the address is the new one');
      assert.ok(!(await removeOrphanedLeases(engine)).includes(secondId), "a running container's lease stays");
      assert.ok(existsSync(path.join(leases, address)));
    } finally {
      await engine.podman(['rm', '--force', '--ignore', first, second]).catch(() => undefined);
      await engine.podman(['network', 'rm', small]).catch(() => undefined);
      rmSync(leases, { recursive: true, force: true }); // `network rm` leaves host-local's folder
    }
  });

  test('port forwards are taken out, so their port reaches what listens on it now; a running replica keeps its own', async () => {
    const [gonePort, livePort] = [await freePort(), await freePort()];
    goneId = await runReplica(names.gone, gonePort);
    const liveId = await runReplica(names.live, livePort);
    const left = rulesOf(goneId);
    assert.equal(left.chains.length, 2, `CNI's chains for the container: ${left.chains.join(', ')}`);
    assert.ok(
      left.rules.some((l) => l.includes(`--dport ${gonePort} -j DNAT`)),
      'its port forward',
    );

    // Podman removes the container and its rules; then they are back, as a removal that skipped
    // the network teardown leaves them.
    await engine.podman(['rm', '--force', names.gone]);
    assert.deepEqual(rulesOf(goneId).rules, [], 'Podman took its rules out');
    const putBack = () =>
      restore(['*nat', ...left.chains.map((c) => `-N ${c}`), ...left.rules, 'COMMIT', ''].join('\n'));

    const listener = createServer((s) => s.end());
    await new Promise<void>((resolve) => listener.listen(gonePort, '127.0.0.1', resolve));
    try {
      // Another container host on this machine (a test file beside this one) may sweep them away
      // first: then they are put back and looked at again.
      let hijacked = false;
      for (let attempt = 0; attempt < 5 && !hijacked; attempt++) {
        if (rulesOf(goneId).rules.length === 0) putBack();
        hijacked = !(await reaches(listener, gonePort)) && rulesOf(goneId).rules.length > 0;
      }
      assert.ok(hijacked, 'the leftover forward takes the connections meant for the listener');

      // This sweep must be the one that takes them out: when a host beside this one got there
      // first, they are put back and swept again.
      let removed = await removeOrphanedForwards(engine);
      for (let attempt = 0; attempt < 5 && !removed.includes(goneId); attempt++) {
        if (rulesOf(goneId).rules.length === 0) putBack();
        removed = await removeOrphanedForwards(engine);
      }
      assert.ok(removed.includes(goneId), `this sweep took out the gone container's forward: ${removed.join(', ')}`);
      assert.deepEqual(rulesOf(goneId).rules, [], 'the leftover rules are gone');
      assert.equal(await reaches(listener, gonePort), true, 'the listener gets its connections again');
    } finally {
      listener.close();
    }

    // The running replica's forward is untouched: it still answers on its published port.
    assert.equal(rulesOf(liveId).chains.length, 2);
    const health = await fetch(`http://127.0.0.1:${livePort}/health`);
    assert.equal(await health.text(), 'ok');
    assert.ok(!(await removeOrphanedForwards(engine)).includes(liveId), "a running replica's rules stay");
    assert.equal(rulesOf(liveId).chains.length, 2);
  });
});
