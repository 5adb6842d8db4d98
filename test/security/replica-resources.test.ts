/**
 * What one replica may take of a container host, tried as a tenant with one ordinary project key
 * would (issue 40: "no ceiling on a replica's resources"):
 *
 * - a deployment asking for more CPUs, memory or storage than the installation's ceilings
 *   (GANTRY_REPLICA_MAX_*) is refused with a 400 naming the field, when it is made and when it is
 *   changed, and one asking for exactly the ceiling is not;
 * - a replica that writes to its own disk without end, from inside its container, is stopped at
 *   its `storage` (or the host's default where its deployment names none) with EDQUOT or ENOSPC,
 *   and its layer on the host holds no more than that. Its write is capped at twice the limit, so that
 *   code which enforces nothing shows it (it writes it all) without filling this machine's disk;
 * - an image larger than the installation allows (GANTRY_REPLICA_MAX_IMAGE_GIB) fails its launch,
 *   saying so in the replica's status, and is not kept on the host.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { PodmanEngine } from '../../providers/containers/podman/podman-engine';
import { buildExampleImage } from '../../scripts/build-example-images';
import { startLocalRegistry, type LocalRegistry } from '../helpers/image-registry';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
/** The installation's ceilings and the storage a replica gets when its deployment names none. */
const MAX = { cpu: 4, memory: 8, storage: 1 };
const DEFAULT_STORAGE_GIB = 0.125;

let registry: LocalRegistry;
let p: TestPlatform;
let attacker: Tenant;
let image: string;
let engine: PodmanEngine;
/** The example replica's image with 96 MiB more, and the largest image this installation runs. */
let bloated: string;
let maxImageGiB: number;

/**
 * Builds the example replica's image and one with `extraMiB` of random bytes more, pushes the
 * larger to the registry, and answers it with the smaller's size (its layers unpacked).
 */
async function publishBloated(extraMiB: number): Promise<{ ref: string; baseBytes: number }> {
  const suffix = randomBytes(4).toString('hex');
  const base = await buildExampleImage(engine, 'http-replica', `localhost/gantry-test/bloat-base-${suffix}:1`);
  const local = `localhost/gantry-test/bloated-${suffix}:1`;
  const context = mkdtempSync(path.join(tmpdir(), 'gantry-bloated-'));
  try {
    writeFileSync(path.join(context, 'filler'), randomBytes(extraMiB * MiB));
    writeFileSync(path.join(context, 'Containerfile'), `FROM ${base}\nCOPY filler /filler\n`);
    await engine.podman(['build', '--quiet', '--network=none', '--tag', local, context], { timeoutMs: 600_000 });
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
  const history = JSON.parse(await engine.podman(['history', '--format', 'json', base])) as Array<{ size: number }>;
  const baseBytes = history.reduce((sum, layer) => sum + layer.size, 0);
  const ref = `${registry.address}/gantry-test/bloated:1`;
  await engine.podman(['push', '--quiet', '--tls-verify=false', local, ref]);
  await engine.podman(['rmi', local, base]);
  return { ref, baseBytes };
}

before(async () => {
  const dataDir = process.env.GANTRY_DATA_DIR ?? path.resolve(__dirname, '../../.data');
  engine = new PodmanEngine(path.join(dataDir, 'podman'));
  registry = await startLocalRegistry(dataDir);
  image = await registry.publish('http-replica');
  const published = await publishBloated(96);
  bloated = published.ref;
  // Room for the example replica's image, not for the bloated one.
  maxImageGiB = (published.baseBytes + 48 * MiB) / GiB;
  p = await startTestPlatform({
    containerRuntime: 'podman',
    env: {
      GANTRY_INSECURE_REGISTRIES: registry.address,
      GANTRY_REPLICA_MAX_CPUS: String(MAX.cpu),
      GANTRY_REPLICA_MAX_MEMORY_GIB: String(MAX.memory),
      GANTRY_REPLICA_MAX_STORAGE_GIB: String(MAX.storage),
      GANTRY_REPLICA_DEFAULT_STORAGE_GIB: String(DEFAULT_STORAGE_GIB),
      GANTRY_REPLICA_MAX_IMAGE_GIB: String(maxImageGiB),
    },
  });
  attacker = await createTenant(p.db);
});
after(async () => {
  await p?.stop();
  await registry?.stop();
  await engine?.podman(['rmi', '--ignore', bloated]).catch(() => undefined);
});

const api = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v1${url}`, { key: attacker.key, json });
const spec = (name: string, fields: Record<string, unknown> = {}) => ({
  name,
  image,
  gpu_type: 'h100-80gb',
  port: 8080,
  health_check_path: '/health',
  termination_grace_period_seconds: 1,
  ...fields,
});

describe('a replica takes no more of its host than the ceilings allow', () => {
  test('a deployment asking for more CPUs, memory or storage than a replica may have is refused, naming the field', async () => {
    for (const [field, ceiling] of Object.entries(MAX)) {
      const res = await api('POST', '/deployments', spec(`greedy-${field}`, { min_replicas: 0, [field]: ceiling * 8 }));
      assert.equal(res.status, 400, `${field}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, field);
    }
    // At the ceilings it is made; asking for more in a change is refused, and changes nothing.
    const made = await api('POST', '/deployments', spec('at-ceilings', { min_replicas: 0, ...MAX }));
    assert.equal(made.status, 200, JSON.stringify(made.body));
    for (const [field, ceiling] of Object.entries(MAX)) {
      const res = await api('PATCH', '/deployments/at-ceilings', { [field]: ceiling + 0.5 });
      assert.equal(res.status, 400, `${field}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, field);
    }
    const kept = await api('GET', '/deployments/at-ceilings');
    assert.deepEqual({ cpu: kept.body.cpu, memory: kept.body.memory, storage: kept.body.storage }, MAX);
  });

  test('a replica that fills its disk from inside stops at its storage, declared or default', async () => {
    for (const [name, storage] of [
      ['declared', 0.25],
      ['undeclared', undefined],
    ] as const) {
      const created = await api('POST', '/deployments', spec(name, { min_replicas: 1, storage }));
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const ready = await eventually(
        () => api('GET', `/deployments/${name}`).then((r) => r.body),
        (d) => d.status === 'Ready',
        120_000,
      );
      const limit = (storage ?? DEFAULT_STORAGE_GIB) * GiB;
      const filled = await call<{ written: number; error: string | null }>(
        p.gatewayUrl,
        'POST',
        `/v1/deployments/${name}/fill?path=/tmp/filler&bytes=${2 * limit}`,
        { key: attacker.key },
      );
      assert.equal(filled.status, 200, JSON.stringify(filled.body));
      const { written, error } = filled.body;
      assert.ok(written <= limit, `${name}: wrote ${written / MiB} MiB, past its ${limit / MiB} MiB (${error})`);
      assert.ok(error === 'EDQUOT' || error === 'ENOSPC', `${name}: stopped by ${error}`);
      // Stopped by its own limit, not by something smaller.
      assert.ok(written > limit - 16 * MiB, `${name}: wrote only ${written / MiB} MiB of ${limit / MiB} MiB`);
      // What the container's own layer holds on the host, as Podman counts it: no more than the limit.
      // (Read per container rather than as the host's free space, which other test files move.)
      const container = (
        await engine.podman(['ps', '--filter', `label=gantry.deployment=${ready.id}`, '--format', '{{.ID}}'])
      ).trim();
      assert.ok(container, `${name}: its container is running`);
      const layer = Number(
        (await engine.podman(['container', 'inspect', '--size', '--format', '{{.SizeRw}}', container])).trim(),
      );
      assert.ok(layer > limit - 16 * MiB, `${name}: its layer holds ${layer / MiB} MiB, less than it wrote`);
      assert.ok(layer < limit + 16 * MiB, `${name}: its layer holds ${layer / MiB} MiB for a ${limit / MiB} MiB limit`);
    }
  });

  test('an image larger than a replica may run fails its launch, saying so, and is not kept', async () => {
    const created = await api('POST', '/deployments', spec('bloated', { image: bloated, min_replicas: 1 }));
    assert.equal(created.status, 200, JSON.stringify(created.body));
    type Events = Record<string, { replica_status: string; replica_status_message?: string }>;
    // Whichever comes first: a replica that failed, or one that runs (the image was not bounded).
    const seen = await eventually(
      () => api('GET', '/deployments/bloated').then((r) => r.body as { status: string; replica_events: Events }),
      (d) => d.status === 'Ready' || Object.values(d.replica_events).some((e) => e.replica_status === 'Failed'),
      120_000,
    );
    assert.notEqual(seen.status, 'Ready', `an image over ${maxImageGiB.toFixed(3)} GiB runs`);
    const failed = Object.values(seen.replica_events).find((e) => e.replica_status === 'Failed');
    assert.match(failed?.replica_status_message ?? '', /takes [\d.]+ GiB unpacked; a replica's image may take at most/);
    assert.ok(failed?.replica_status_message?.includes(bloated), 'the status names the image as the deployment does');
    // Once no launch can pull it again (each failed one took it out), the host does not have it.
    assert.equal((await api('DELETE', '/deployments/bloated')).status, 200);
    await eventually(
      () => api('GET', '/deployments/bloated').then((r) => r.status),
      (status) => status === 404,
      60_000,
    );
    const kept = () =>
      engine.podman(['image', 'exists', bloated]).then(
        () => true,
        () => false,
      );
    await eventually(kept, (k) => !k, 30_000);
  });
});
