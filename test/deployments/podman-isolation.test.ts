/**
 * Container deployments on the podman runtime: a replica runs its image (built
 * by the project, pushed to a local registry, pulled at launch) in a container,
 * and a tenant's container reaches nothing of the host or of other tenants.
 *
 * Its volume and its model revision are mounted read-only; nothing else of the
 * host is. The probe is the example replica itself (examples/http-replica): /file reads
 * a path inside the container, /connect opens a TCP connection from it. Every
 * "cannot" has a "can" beside it, so a broken probe cannot pass for isolation:
 * the container reads its own volume and /proc, and connects to itself and to
 * its own project's other replica.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { projectNetworkName } from '../../providers/containers/podman/replica-networks';
import { startLocalRegistry, type LocalRegistry } from '../helpers/image-registry';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { storeValidatedRevision } from '../helpers/models';
import { createTenant, type Tenant } from '../helpers/tenants';
import { podmanOf, testDeploymentBody } from '../helpers/podman-platform';

let registry: LocalRegistry;
let p: TestPlatform;
let a: Tenant;
let b: Tenant;
let image: string;
let queueWorkerImage: string;
/**
 * Where the host publishes replicas (GANTRY_CONTAINER_HOST_ADDRESS): this machine's own network
 * address, as a container host among several would (127.0.0.2 where it has none), so a published
 * port is on an address other hosts' containers could route to.
 */
const publishAddress =
  Object.entries(networkInterfaces())
    // Not a bridge of containers (Podman's own, or another engine's), which comes and goes with them.
    .filter(([name]) => !/^(cni|podman|veth|docker|br-|virbr)/.test(name))
    .flatMap(([, addresses]) => addresses ?? [])
    .find((i) => i.family === 'IPv4' && !i.internal)?.address ?? '127.0.0.2';
/** A service on every address of this host, as PostgreSQL or Temporal would be on a real one. */
let hostService: Server;
let hostServicePort: number;

before(async () => {
  const dataDir = process.env.GANTRY_DATA_DIR ?? path.resolve(__dirname, '../../.data');
  registry = await startLocalRegistry(dataDir);
  image = await registry.publish('http-replica');
  queueWorkerImage = await registry.publish('queue-worker');
  p = await startTestPlatform({
    containerRuntime: 'podman',
    env: {
      GANTRY_INSECURE_REGISTRIES: registry.address,
      GANTRY_CONTAINER_HOST_ADDRESS: publishAddress,
      GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1',
      GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '1',
    },
  });
  a = await createTenant(p.db);
  b = await createTenant(p.db);
  hostService = createServer((s) => s.end('hello\n'));
  await new Promise<void>((resolve) => hostService.listen(0, '0.0.0.0', resolve));
  hostServicePort = (hostService.address() as { port: number }).port;
});
after(async () => {
  // Timed: this file once took two minutes after its last test under a loaded machine; say where.
  const started = Date.now();
  // (A before() that failed part way leaves some of these unset: stop what there is, or the
  // registry it started keeps this file's process alive until its timeout.)
  await p?.stop();
  const platformSeconds = (Date.now() - started) / 1000;
  hostService?.close();
  await registry?.stop();
  process.stderr.write(
    `teardown: platform ${platformSeconds.toFixed(1)} s, image registry ${((Date.now() - started) / 1000 - platformSeconds).toFixed(1)} s\n`,
  );
});

const api = (method: string, url: string, json?: unknown, key = a.key) =>
  call(p.baseUrl, method, `/v1${url}`, { key, json });
const line = (n: number) => JSON.stringify({ text: `line ${n}` }) + '\n';

/** What the replica of `key`'s deployment `name` answers on `route`, through the gateway. */
async function viaGateway(key: string, name: string, route: string): Promise<{ status: number; text: string }> {
  const res = await call<unknown>(p.gatewayUrl, 'GET', `/v1/deployments/${name}${route}`, { key });
  return { status: res.status, text: typeof res.body === 'string' ? res.body : JSON.stringify(res.body) };
}
const readFrom = (key: string, name: string, file: string) =>
  viaGateway(key, name, `/file?path=${encodeURIComponent(file)}`);
const connectFrom = (key: string, name: string, host: string, port: number) =>
  viaGateway(key, name, `/connect?host=${encodeURIComponent(host)}&port=${port}`).then((r) => r.text);

const podman = (args: string[]) => podmanOf(p.config.dataDir)(args);
const containerIp = (replicaId: string) =>
  podman([
    'inspect',
    `gantry-${replicaId}`,
    '--format',
    '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}',
  ]).trim();
const gatewayOf = (projectId: string) =>
  podman([
    'network',
    'inspect',
    projectNetworkName(projectId),
    '--format',
    '{{range .Subnets}}{{.Gateway}}{{end}}',
  ]).trim();

async function runningReplicas(deploymentId: string): Promise<string[]> {
  const { rows } = await p.db.query<{ replica_id: string }>(
    `SELECT replica_id FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running' ORDER BY replica_id`,
    [deploymentId],
  );
  return rows.map((r) => r.replica_id);
}

async function deploy(
  key: string,
  spec: Record<string, unknown>,
  name = 'web',
): Promise<{ id: string; ready_replicas: number }> {
  const created = await api(
    'POST',
    '/deployments',
    testDeploymentBody(name, image, { max_replicas: 2, termination_grace_period_seconds: 2, ...spec }),
    key,
  );
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return eventually(
    () => api('GET', `/deployments/${name}`, undefined, key).then((r) => r.body),
    (d) => d.status === 'Ready',
    120_000,
  );
}

describe('container deployments (podman runtime)', () => {
  test("a tenant's container runs its image and reaches nothing of the host or of another tenant", async () => {
    // Project A: a secret, a volume, limits, two replicas. Project B: a deployment of the same name.
    const secretValue = `s3cr3t-${Date.now()}`;
    assert.equal((await api('POST', '/deployments/secrets', { name: 'token', value: secretValue })).status, 200);
    await uploadValidated(p, a.key, 'assets-a.jsonl', line(1));
    const volume = await api('POST', '/deployments/storage/volumes', {
      name: 'assets',
      type: 'readOnly',
      content: { type: 'files', source_prefix: 'assets-' },
    });
    assert.equal(volume.status, 200, JSON.stringify(volume.body));
    // A registered model revision to mount.
    const model = (
      await call(p.baseUrl, 'POST', `/v2/projects/${a.projectId}/models`, {
        key: a.key,
        json: { baseModelId: 'gantry/reference-byte-tiny', name: 'mounted', type: 'model' },
      })
    ).body;
    const weights = Buffer.from('pretend safetensors');
    await storeValidatedRevision(p, model.id, 'rv_pm1', { 'model.safetensors': weights });
    const depA = await deploy(a.key, {
      model_mounts: [{ model_id: 'mounted', mount_path: '/models/m' }],
      min_replicas: 2,
      cpu: 0.5,
      memory: 0.25,
      environment_variables: [{ name: 'TOKEN', value_from_secret: 'token' }],
      volumes: [{ name: 'assets', mount_path: '/data/assets' }],
    });
    const bFile = await uploadValidated(p, b.key, 'private-b.jsonl', line(2));
    const depB = await deploy(b.key, {});

    // Replica ids are the deployment's id and a number: the same name in two projects never collides.
    const [a1, a2] = await runningReplicas(depA.id);
    const [b1] = await runningReplicas(depB.id);
    assert.ok(a1.startsWith(depA.id) && a2.startsWith(depA.id) && b1.startsWith(depB.id), `${a1} ${a2} ${b1}`);

    // The image's root filesystem, its own PID namespace, its declared volume, its secret.
    assert.match((await readFrom(a.key, 'web', '/proc/1/cmdline')).text, /\/app\/server\.mjs/);
    assert.equal((await readFrom(a.key, 'web', '/etc/os-release')).status, 404, 'not the host root filesystem');
    assert.equal((await readFrom(a.key, 'web', '/data/assets/assets-a.jsonl')).text, line(1));
    assert.equal((await readFrom(a.key, 'web', '/models/m/model.safetensors')).text, weights.toString());
    // The container reads them as an unprivileged id of its own; on the host they sit in a
    // directory of the host's user only, which no other account of the machine can enter.
    const volumeDir = path.join(p.config.dataDir, 'deployment-volumes', volume.body.id);
    assert.equal(statSync(volumeDir).mode & 0o777, 0o700);
    assert.equal(statSync(path.join(volumeDir, 'v1')).mode & 0o777, 0o755);
    assert.equal(statSync(path.join(volumeDir, 'v1', 'assets-a.jsonl')).mode & 0o777, 0o444);
    // The host's sweep of its files, with no keep time at all, takes nothing the containers mount.
    assert.deepEqual(await p.housekeeping.files.sweep(0), []);
    assert.equal((await readFrom(a.key, 'web', '/data/assets/assets-a.jsonl')).text, line(1));
    assert.equal((await readFrom(a.key, 'web', '/models/m/model.safetensors')).text, weights.toString());
    assert.equal((await viaGateway(a.key, 'web', '/env?name=TOKEN')).text, secretValue);
    assert.equal((await viaGateway(a.key, 'web', '/env?name=DATABASE_URL')).text, '');

    // Its own users: each container's ids are a range of unprivileged host ids, its root among
    // them, which no other container shares; its processes run as those ids on the host.
    const idRange = (uidMap: string) => {
      const [inside, host, size] = uidMap.trim().split(/\s+/).map(Number);
      return { inside, host, size };
    };
    const ranges = [a1, a2, b1].map((replica) => {
      const pid = podman(['inspect', `gantry-${replica}`, '--format', '{{.State.Pid}}']).trim();
      const range = idRange(readFileSync(`/proc/${pid}/uid_map`, 'utf8'));
      const uid = Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
      assert.equal(range.inside, 0, `${replica}: ${JSON.stringify(range)}`);
      assert.ok(range.host > 0 && range.size >= 1024, `${replica}: ${JSON.stringify(range)}`);
      assert.ok(uid >= range.host && uid < range.host + range.size, `${replica} runs as host uid ${uid}`);
      return range;
    });
    for (const [i, r] of ranges.entries())
      for (const other of ranges.slice(i + 1))
        assert.ok(r.host + r.size <= other.host || other.host + other.size <= r.host, 'two containers share ids');
    // The container sees the same map (the probe answers from one of A's two replicas).
    const seen = idRange((await readFrom(a.key, 'web', '/proc/self/uid_map')).text);
    assert.ok(
      ranges.slice(0, 2).some((r) => r.host === seen.host && r.size === seen.size),
      JSON.stringify(seen),
    );

    // Nothing of Gantry's data directory: a canary beside the keys, another project's blob, the repository.
    const canary = path.join(p.config.dataDir, 'isolation-canary');
    writeFileSync(canary, 'host secret\n');
    const { rows } = await p.db.query<{ blob_key: string }>('SELECT blob_key FROM files WHERE id = $1', [bFile]);
    const bBlob = path.join(p.config.blobDir, rows[0].blob_key);
    assert.ok(existsSync(bBlob), 'the blob is on the host');
    for (const hostFile of [canary, bBlob, path.resolve(__dirname, '../../package.json')]) {
      const seen = await readFrom(a.key, 'web', hostFile);
      assert.deepEqual(seen, { status: 404, text: 'ENOENT' }, hostFile);
    }
    // Nor B's view of A's volume.
    assert.deepEqual(await readFrom(b.key, 'web', '/data/assets/assets-a.jsonl'), { status: 404, text: 'ENOENT' });

    // Limits from cpu and memory (cgroup v1 or v2 files, whichever this host has).
    const limits = async (key: string) => {
      const memory = await readFrom(key, 'web', '/sys/fs/cgroup/memory/memory.limit_in_bytes');
      const memoryV2 = await readFrom(key, 'web', '/sys/fs/cgroup/memory.max');
      const quota = await readFrom(key, 'web', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us');
      const cpuV2 = await readFrom(key, 'web', '/sys/fs/cgroup/cpu.max');
      return {
        memory: (memory.status === 200 ? memory : memoryV2).text.trim(),
        cpu: (quota.status === 200 ? quota : cpuV2).text.trim().split(/\s+/)[0],
      };
    };
    assert.deepEqual(await limits(a.key), { memory: String(256 * 1024 * 1024), cpu: '50000' });
    // B set none: the host's defaults (GANTRY_REPLICA_DEFAULT_CPUS, GANTRY_REPLICA_DEFAULT_MEMORY_GIB), not the whole host.
    const defaults = p.config.replicaDefaultLimits;
    assert.deepEqual(await limits(b.key), {
      memory: String(defaults.memoryGiB * 1024 ** 3),
      cpu: String(defaults.cpus * 100_000),
    });

    // Network: itself and its own project's other replica, yes; the host and project B, no.
    assert.equal(await connectFrom(a.key, 'web', '127.0.0.1', 8080), 'connected', 'the probe can connect');
    const a2Ip = containerIp(a2);
    const a1Ip = containerIp(a1);
    const sameProject = await Promise.all([
      connectFrom(a.key, 'web', a2Ip, 8080),
      connectFrom(a.key, 'web', a1Ip, 8080),
    ]);
    assert.ok(sameProject.includes('connected'), `a replica reaches its sibling: ${sameProject}`);
    const temporalPort = Number(p.config.temporal.address.split(':').pop());
    const postgresPort = Number(new URL(p.config.databaseUrl!).port || 5432);
    const hostAddresses = [
      gatewayOf(a.projectId),
      ...Object.values(networkInterfaces())
        .flat()
        .filter((i) => i && i.family === 'IPv4' && !i.internal)
        .map((i) => i!.address),
    ];
    for (const host of hostAddresses) {
      for (const port of [hostServicePort, postgresPort, temporalPort]) {
        assert.notEqual(await connectFrom(a.key, 'web', host, port), 'connected', `${host}:${port} from a container`);
      }
    }
    assert.notEqual(await connectFrom(a.key, 'web', containerIp(b1), 8080), 'connected', "project B's replica");
    assert.notEqual(await connectFrom(b.key, 'web', a1Ip, 8080), 'connected', "project A's replica");
    // Replicas are published on the host's address (where the gateway reaches them), and a port
    // published there is no way around the rules: B's container does not reach A's replica through it.
    const published = await p.db.query<{ address: string; port: number }>(
      `SELECT address, port FROM deployment_replicas WHERE replica_id = $1`,
      [a1],
    );
    assert.equal(published.rows[0].address, publishAddress);
    const aPublished = await fetch(`http://${publishAddress}:${published.rows[0].port}/health`);
    assert.equal(aPublished.status, 200, 'the host reaches the published port');
    assert.notEqual(
      await connectFrom(b.key, 'web', publishAddress, published.rows[0].port),
      'connected',
      "project A's replica through its published port",
    );

    // The secret travelled in no command line on this host.
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      let cmdline = '';
      try {
        cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      } catch {
        continue; // exited meanwhile
      }
      assert.ok(!cmdline.includes(secretValue), `process ${pid} has the secret on its command line`);
    }

    // Logs through the API, from the container's own output.
    await call(p.gatewayUrl, 'POST', '/v1/deployments/web/log?text=hello-from-a-container', { key: a.key });
    const logs = await eventually(
      () => api('GET', `/deployments/${depA.id}/logs`).then((r) => r.body.lines as string[]),
      (lines) => lines.some((l) => l.includes('hello-from-a-container')),
    );
    assert.ok(logs.some((l) => l.includes('listening on 8080')));

    // Deleting B's deployment stops B's container and leaves A's running.
    assert.equal((await api('DELETE', '/deployments/web', undefined, b.key)).status, 200);
    await eventually(
      async () => podman(['ps', '--filter', `label=gantry.deployment=${depB.id}`, '--format', '{{.Names}}']).trim(),
      (names) => names === '',
    );
    // Its project network goes with its last replica.
    await eventually(
      async () => podman(['network', 'ls', '--format', '{{.Name}}']).split('\n'),
      (names) => !names.includes(projectNetworkName(b.projectId)),
    );
    assert.equal((await viaGateway(a.key, 'web', '/health')).text, 'ok');
    assert.equal(
      podman(['ps', '--filter', `label=gantry.deployment=${depA.id}`, '--format', '{{.Names}}'])
        .trim()
        .split('\n').length,
      2,
    );
  });

  test("queue workers in containers reach the API, and nothing else; autoscaling reads a container's metric", async () => {
    // The key the workers claim with, as a secret; GANTRY_BASE_URL is the runtime's (the bridge's forwarder).
    assert.equal((await api('POST', '/deployments/secrets', { name: 'queue-key', value: a.key })).status, 200);
    const jobs = await deploy(
      a.key,
      {
        image: queueWorkerImage,
        min_replicas: 2,
        environment_variables: [
          { name: 'GANTRY_API_KEY', value_from_secret: 'queue-key' },
          { name: 'CLAIM_TIMEOUT_SECONDS', value: '5' },
        ],
      },
      'jobs',
    );
    const submitted = await Promise.all(
      [1, 2, 3].map((n) =>
        api('POST', '/queue/submit', { model: 'jobs', payload: { op: 'echo', value: n }, priority: 1 }),
      ),
    );
    for (const s of submitted) assert.equal(s.status, 200, JSON.stringify(s.body));
    for (const [i, s] of submitted.entries()) {
      const done = await eventually(
        () => api('GET', `/queue/status?model=jobs&request_id=${s.body.request_id}`).then((r) => r.body),
        (j) => j.status === 'done' || j.status === 'failed',
        60_000,
      );
      assert.deepEqual([done.status, done.outputs], ['done', { value: i + 1 }]);
    }
    const [worker] = await runningReplicas(jobs.id);
    const workerLogs = (await api('GET', `/deployments/${jobs.id}/logs?replica_id=${worker}`)).body.lines as string[];
    assert.ok(
      workerLogs.some((l) => l.includes('"worker"')),
      workerLogs.join('\n'),
    );
    // The forwarder is the API's port on the bridge's gateway, and only that: PostgreSQL beside it is not.
    const gateway = gatewayOf(a.projectId);
    const apiPort = Number(new URL(p.baseUrl).port);
    assert.equal(await connectFrom(a.key, 'web', gateway, apiPort), 'connected', 'the API, through the forwarder');
    const postgresPort = Number(new URL(p.config.databaseUrl!).port || 5432);
    assert.notEqual(await connectFrom(a.key, 'web', gateway, postgresPort), 'connected');

    // Autoscaling on a custom metric the container exposes (scraped through its published port).
    await deploy(
      a.key,
      {
        min_replicas: 1,
        max_replicas: 2,
        autoscaling: {
          metric: 'CustomMetric',
          custom_metric_name: 'inflight_requests',
          target: 1,
          time_interval_minutes: 0,
        },
      },
      'scaled',
    );
    await call(p.gatewayUrl, 'POST', '/v1/deployments/scaled/set-metric?value=2', { key: a.key });
    const up = await eventually(
      () => api('GET', '/deployments/scaled').then((r) => r.body),
      (d) => d.ready_replicas === 2,
      60_000,
    );
    assert.equal(up.desired_replicas, 2);
  });
});
