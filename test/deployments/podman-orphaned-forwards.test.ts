/**
 * Port forwards Podman leaves behind for a replica container that is gone
 * (providers/containers/podman/orphaned-port-forwards.ts), on real Podman and iptables.
 *
 * Podman leaves them now and then, when a container is removed without its network torn down;
 * that cannot be caused on purpose. So the test makes the same state from real parts: CNI's own
 * rules for a replica container, read while it ran, put back after Podman removed the container
 * and its rules. With them back, a listener on the old host port gets none of its connections;
 * after the sweep it does, and a running replica's port forward is left as it was.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PodmanEngine, SYSTEM_PATH } from '../../providers/containers/podman/podman-engine';
import { removeOrphanedForwards } from '../../providers/containers/podman/orphaned-port-forwards';
import { projectNetworkName } from '../../providers/containers/podman/replica-networks';
import { freePort } from '../../scripts/lib/ports';
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

describe('port forwards Podman left for replica containers that are gone', () => {
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

  test('are taken out, so their port reaches what listens on it now; a running replica keeps its own', async () => {
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

      const removed = await removeOrphanedForwards(engine);
      assert.deepEqual(rulesOf(goneId).rules, [], 'the leftover rules are gone');
      // (Unless a host beside this one took them out in the instant before.)
      assert.ok(removed.includes(goneId) || removed.length === 0, `removed: ${removed.join(', ')}`);
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
