/**
 * The containers a crashed container host leaves on its machine (real rootful Podman, real host
 * processes killed with SIGKILL). A host that starts next on the machine, with no
 * GANTRY_CONTAINER_HOST_ID (the default single-machine setup), finds them by their labels: its
 * own (its name is kept under the data directory), adopted and supervised again by their
 * deployment's run; another host's that no longer runs, stopped and recorded as such. Either
 * way a deployment counts no replica `Running` that nothing supervises, and once deleted leaves
 * no container behind.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually } from '../helpers/platform';
import { startPodmanPlatform, type PodmanPlatform } from '../helpers/podman-platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

type Replicas = Record<string, { replica_status: string; replica_status_reason?: string }>;

let pp: PodmanPlatform;
let t: Tenant;
const hosts: StartedProcess[] = [];

before(async () => {
  pp = await startPodmanPlatform({}, { containers: false });
  t = await createTenant(pp.p.db);
});
/** Shuts down the hosts still running (each test starts from none, whatever the last one did). */
async function stopHosts(): Promise<void> {
  for (const h of hosts) if (h.child.exitCode === null) h.child.kill('SIGTERM');
  await Promise.all(hosts.map((h) => h.exited));
}
after(async () => {
  await stopHosts();
  // What a failed run left (today's code leaves the crashed host's containers running).
  const left = containers(`gantry.project=${t.projectId}`);
  if (left.length) pp.podman(['rm', '--force', '--time', '0', ...left]);
  await pp.stop();
});

const api = (method: string, url: string) => call(pp.p.baseUrl, method, `/v1${url}`, { key: t.key });
const replicasOf = async (name: string): Promise<Replicas> =>
  (await api('GET', `/deployments/${name}`)).body.replica_events;
const running = (r: Replicas) => Object.keys(r).filter((id) => r[id].replica_status === 'Running');
/** The names of the containers (running or not) with this label, on the machine's store. */
const containers = (label: string, all = true) =>
  pp
    .podman(['ps', ...(all ? ['--all'] : []), '--filter', `label=${label}`, '--format', '{{.Names}}'])
    .split('\n')
    .filter(Boolean);

/** A container host process as the default setup runs one (no name unless `env` gives one). */
async function startHost(env: Record<string, string> = {}): Promise<StartedProcess> {
  const h = startProcess('workers/container-host.ts', {
    GANTRY_CONTAINER_RUNTIME: 'podman',
    GANTRY_INSECURE_REGISTRIES: pp.p.config.insecureRegistries.join(','),
    GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '1',
    ...env,
  });
  hosts.push(h);
  await h.waitFor(/container host polling/, 120_000);
  return h;
}

/** Until the deployment's replica supervisor runs on host process `h`. */
async function supervisedOn(deploymentId: string, h: StartedProcess): Promise<void> {
  const handle = pp.p.temporal.workflow.getHandle(`deployment/${deploymentId}`);
  await eventually(
    async () => (await handle.describe()).raw.pendingActivities ?? [],
    (pending) =>
      pending.some(
        (a) =>
          a.activityType?.name === 'superviseReplica' && String(a.lastWorkerIdentity ?? '').includes(`:${h.child.pid}`),
      ),
    120_000,
    500,
  );
}

/** Deletes the deployment, waits until its run has removed it, and checks that no container of it is left. */
async function deleteLeavesNoContainer(name: string, deploymentId: string): Promise<void> {
  assert.equal((await api('DELETE', `/deployments/${name}`)).status, 200);
  await eventually(
    () => api('GET', `/deployments/${name}`),
    (r) => r.status === 404,
    60_000,
  );
  const run = pp.p.temporal.workflow.getHandle(`deployment/${deploymentId}`);
  await eventually(
    async () => (await run.describe()).status.name,
    (status) => status !== 'RUNNING',
    30_000,
  );
  assert.equal((await run.describe()).status.name, 'COMPLETED', 'the run of the deployment ended');
  assert.deepEqual(containers(`gantry.deployment=${deploymentId}`, false), [], 'no container of it runs');
  // `--rm`: Podman removes a stopped container as its client exits.
  await eventually(
    async () => containers(`gantry.deployment=${deploymentId}`),
    (left) => left.length === 0,
    15_000,
  );
}

describe('containers a crashed container host left on its machine', () => {
  test('a restarted host with no name given is the same host: it adopts its container, supervised as before', async () => {
    await stopHosts();
    const first = await startHost();
    const d = await pp.deploy(t.key, 'survives-crash', {});
    const [replica] = Object.keys(await replicasOf('survives-crash'));
    const [container] = containers(`gantry.replica=${replica}`);
    assert.ok(container, 'the replica runs in a container');

    first.child.kill('SIGKILL');
    await first.exited;
    assert.deepEqual(containers(`gantry.replica=${replica}`, false), [container], 'the container outlived its host');

    const second = await startHost();
    await supervisedOn(d.id, second);
    assert.deepEqual(
      running(await replicasOf('survives-crash')),
      [replica],
      'the replica from before the crash, alone',
    );
    assert.deepEqual(containers(`gantry.deployment=${d.id}`, false), [container], 'no second container');

    // Supervised: its end is noticed, and the deployment replaces it.
    pp.podman(['kill', container]);
    const replaced = await eventually(
      () => replicasOf('survives-crash'),
      (r) => r[replica].replica_status !== 'Running' && running(r).length === 1,
      120_000,
      500,
    );
    assert.notEqual(running(replaced)[0], replica);

    await deleteLeavesNoContainer('survives-crash', d.id);
    second.child.kill('SIGTERM');
    await second.exited;
  });

  test("another host's container, whose host no longer runs on the machine, is stopped and recorded so", async () => {
    await stopHosts();
    const gone = await startHost({ GANTRY_CONTAINER_HOST_ID: `gone-${process.pid}` });
    const d = await pp.deploy(t.key, 'host-gone', {});
    const [replica] = Object.keys(await replicasOf('host-gone'));
    const [container] = containers(`gantry.replica=${replica}`, false);
    assert.equal(
      pp.podman(['inspect', '--format', '{{index .Config.Labels "gantry.host"}}', container]).trim(),
      `gone-${process.pid}`,
      'it runs on that host',
    );
    gone.child.kill('SIGKILL');
    await gone.exited;
    assert.deepEqual(containers(`gantry.replica=${replica}`, false), [container], 'the container outlived its host');

    await startHost();
    const stopped = await eventually(
      () => replicasOf('host-gone'),
      (r) => r[replica].replica_status !== 'Running',
      60_000,
      500,
    );
    assert.equal(stopped[replica].replica_status, 'Terminated');
    assert.equal(stopped[replica].replica_status_reason, 'HostLost');
    assert.deepEqual(containers(`gantry.replica=${replica}`, false), [], 'its container is stopped');
    // The deployment runs one replica again, on the host that is there.
    const again = await eventually(
      () => replicasOf('host-gone'),
      (r) => running(r).length === 1,
      120_000,
      500,
    );
    assert.notEqual(running(again)[0], replica);

    await deleteLeavesNoContainer('host-gone', d.id);
  });
});
