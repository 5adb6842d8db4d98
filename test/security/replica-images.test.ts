/**
 * Images are the project's own (podman runtime). The victim pushes a private image to its own
 * path of the installation's registry (GANTRY_IMAGE_REGISTRY, a local docker-registry here, at
 * `<registry>/<victim's slug>/…`) and deploys it, so the container host holds it; the attacker
 * then names that image every way the host's store would answer to (the same reference, a short
 * name, the image's id), and no replica of the attacker ever runs it: refused at the API where
 * the reference says whose it is, and at launch where only a pull with the attacker's own access
 * could find it. Beside each "cannot", a "can": the attacker runs its own image from its own path.
 *
 * And a pull that fails says that the image could not be pulled, and nothing of what the registry
 * (or whatever listens at the address the image names) answered: the attacker cannot tell a
 * closed port from an open one by the replica's status. The operator's log keeps the reason. A
 * registry at a private address that the operator did not name is never contacted at all.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { freePort } from '../../platform/ports';
import { startLocalRegistry, type LocalRegistry } from '../helpers/image-registry';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { podmanOf, testDeploymentBody } from '../helpers/podman-platform';

let registry: LocalRegistry;
let p: TestPlatform;
let victim: Tenant;
let attacker: Tenant;
/** The victim's private image, at its project's path of the installation's registry. */
let victimImage: string;
/** The attacker's own image, at its own path. */
let attackerImage: string;

before(async () => {
  const dataDir = process.env.GANTRY_DATA_DIR ?? path.resolve(__dirname, '../../.data');
  registry = await startLocalRegistry(dataDir);
  p = await startTestPlatform({
    containerRuntime: 'podman',
    env: { GANTRY_IMAGE_REGISTRY: registry.address, GANTRY_INSECURE_REGISTRIES: registry.address },
  });
  victim = await createTenant(p.db);
  attacker = await createTenant(p.db);
  victimImage = await registry.publish('http-replica', `${victim.projectSlug}/http-replica`);
  attackerImage = await registry.publish('http-replica', `${attacker.projectSlug}/http-replica`);
});
after(async () => {
  await p?.stop();
  await registry?.stop();
});

const api = (key: string, method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v1${url}`, { key, json });
const get = (key: string, name: string) => api(key, 'GET', `/deployments/${name}`).then((r) => r.body);
const events = (d: any) => Object.values((d.replica_events ?? {}) as Record<string, any>);

/** Deploys and waits until the deployment is Ready or a replica of it failed; the deployment then. */
async function deployAndSettle(key: string, name: string, image: string): Promise<any> {
  const created = await api(key, 'POST', '/deployments', testDeploymentBody(name, image));
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return eventually(
    () => get(key, name),
    (d) => d.status === 'Ready' || events(d).some((e) => e.replica_status === 'Failed'),
    180_000,
  );
}

/** Every line the deployment's replicas logged, through the logs route. */
async function logLines(key: string, name: string): Promise<string[]> {
  const lines: string[] = [];
  for (const replicaId of Object.keys((await get(key, name)).replica_events ?? {})) {
    lines.push(...((await api(key, 'GET', `/deployments/${name}/logs?replica_id=${replicaId}`)).body.lines ?? []));
  }
  return lines;
}

const podman = (args: string[]) => podmanOf(p.config.dataDir)(args);

describe("a project's images", () => {
  let imageId: string;

  test('each project runs its own image from its own path', async () => {
    const mine = await deployAndSettle(victim.key, 'private', victimImage);
    assert.equal(mine.status, 'Ready', JSON.stringify(mine));
    assert.ok(
      (await logLines(victim.key, 'private')).some((l) => l.includes('listening on')),
      "the victim's replica runs its image",
    );
    // The host holds the victim's image now.
    imageId = podman(['image', 'inspect', '--format', '{{.Id}}', victimImage]).trim();
    assert.match(imageId, /^[0-9a-f]{64}$/);
    const own = await deployAndSettle(attacker.key, 'own', attackerImage);
    assert.equal(own.status, 'Ready', JSON.stringify(own));
  });

  test("another project's image, by its reference or its id, is refused at the API", async () => {
    for (const image of [victimImage, imageId]) {
      const res = await api(attacker.key, 'POST', '/deployments', testDeploymentBody('stolen', image));
      assert.equal(res.status, 400, `${image}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, 'image', JSON.stringify(res.body));
    }
    const changed = await api(attacker.key, 'PATCH', '/deployments/own', { image: victimImage });
    assert.equal(changed.status, 400, JSON.stringify(changed.body));
    assert.equal(changed.body.error.param, 'image', JSON.stringify(changed.body));
  });

  test("names the host's store answers to with another project's image are pulled with the project's own access", async () => {
    // A short name without the registry, the short id, the digest form of the id: each launch
    // asks a registry with the attacker's access, which has none, whatever the host holds.
    const names = [`${victim.projectSlug}/http-replica:1`, imageId.slice(0, 12), `sha256:${imageId}`];
    for (const [i, image] of names.entries()) {
      const name = `stolen-${i}`;
      const d = await deployAndSettle(attacker.key, name, image);
      assert.notEqual(d.status, 'Ready', `${image}: ${JSON.stringify(d)}`);
      const failed = events(d).find((e) => e.replica_status === 'Failed');
      assert.match(failed?.replica_status_message ?? '', /could not be pulled/, JSON.stringify(d));
      assert.deepEqual(
        (await logLines(attacker.key, name)).filter((l) => l.includes('listening on')),
        [],
        `${image}: the victim's image ran for the attacker`,
      );
      await api(attacker.key, 'DELETE', `/deployments/${name}`);
    }
  });

  test('a pull that fails says so without what the registry answered', async () => {
    // Nothing listens on one port; something that is not a registry on the other.
    const closedPort = await freePort();
    let reached = 0;
    const other: Server = createServer((socket) => {
      reached++;
      socket.end('SSH-2.0-OpenSSH_9.2\r\n');
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const openPort = (other.address() as { port: number }).port;
    try {
      const probes = [
        { name: 'probe-closed', image: `127.0.0.1:${closedPort}/probe/app:1` },
        { name: 'probe-open', image: `127.0.0.1:${openPort}/probe/app:1` },
      ];
      const said: string[] = [];
      for (const probe of probes) {
        const d = await deployAndSettle(attacker.key, probe.name, probe.image);
        const failed = events(d).find((e) => e.replica_status === 'Failed');
        const message: string = failed?.replica_status_message ?? '';
        assert.match(message, /could not be pulled/, JSON.stringify(d));
        assert.ok(message.includes(probe.image), `the status names the image: ${message}`);
        // Nothing but the attacker's own words, the image, comes back: no error of a dial, TLS or HTTP.
        const whole = JSON.stringify(d).replaceAll(probe.image, '<image>');
        assert.doesNotMatch(whole, /refused|dial|tcp|tls|handshake|pinging|malformed|https?:|SSH/i, whole);
        for (const port of [closedPort, openPort]) assert.ok(!whole.includes(String(port)), whole);
        said.push(message.replaceAll(probe.image, '<image>'));
        await api(attacker.key, 'DELETE', `/deployments/${probe.name}`);
      }
      assert.equal(said[0], said[1], 'a closed port and an open one read the same');
      // A registry the operator did not name is reached at public addresses only: the host never
      // connected to this one, and its log says why, for the operator.
      assert.equal(reached, 0, 'the container host connected to a private address a tenant named');
      assert.match(p.logs.text(), /127\.0\.0\.1 resolves to a private address/);
    } finally {
      other.close();
    }
  });
});
