/**
 * Container hosts on several machines: each publishes its replicas on its own address
 * (GANTRY_CONTAINER_HOST_ADDRESS), records it with each replica, and everything that calls a
 * replica goes there: the gateway, the CustomMetric scrape (on whichever host takes it), and the
 * health check. Two real container host processes (workers/container-host.ts, as docker-compose
 * runs them: the container queues only, beside a control worker) stand for two machines, at
 * 127.0.0.2 and 127.0.0.3 (loopback addresses other than 127.0.0.1: a replica there does not
 * answer at 127.0.0.1, so a caller that still assumed "this machine" would miss it).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';
import { deployHttpReplica } from '../helpers/deployments';
import { ConfigError, loadConfig } from '../../platform/config';

const ADDRESS_A = '127.0.0.2';
const ADDRESS_B = '127.0.0.3';
let p: TestPlatform;
let t: Tenant;
const workers: StartedProcess[] = [];

before(async () => {
  p = await startTestPlatform({
    containers: false,
    env: { GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1', GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '1' },
  });
  t = await createTenant(p.db);
});
after(async () => {
  // A container host that stops leaves its replicas running (so that a restart keeps them): delete
  // the deployments while the hosts still run, so no replica outlives this file.
  for (const name of ['on-a', 'on-b']) {
    const deleted = await call(p.baseUrl, 'DELETE', `/v1/deployments/${name}`, { key: t.key });
    if (deleted.status !== 200) continue; // never made: the test failed before
    await eventually(
      () => call(p.baseUrl, 'GET', `/v1/deployments/${name}`, { key: t.key }).then((r) => r.status),
      (status) => status === 404,
      30_000,
    );
  }
  for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGTERM');
  await Promise.all(workers.map((w) => w.exited));
  await p.stop();
});

/** A container host process named `name`, publishing its replicas on `address`. */
async function startHost(name: string, address: string): Promise<StartedProcess> {
  const w = startProcess('workers/container-host.ts', {
    GANTRY_CONTAINER_RUNTIME: 'process',
    GANTRY_SINGLE_TENANT: 'yes',
    GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '1',
    GANTRY_CONTAINER_HOST_ID: `${name}-${process.pid}`,
    GANTRY_CONTAINER_HOST_ADDRESS: address,
  });
  workers.push(w);
  await w.waitFor(/container host polling with the process runtime/);
  return w;
}

const replicasOf = async (deploymentId: string) =>
  (
    await p.db.query<{ address: string; port: number; host: string }>(
      `SELECT address, port, host FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
      [deploymentId],
    )
  ).rows;

/** Whether anything accepts a connection at `address:port`. */
const answersAt = (address: string, port: number) =>
  fetch(`http://${address}:${port}/health`, { signal: AbortSignal.timeout(2000) }).then(
    (r) => r.ok,
    () => false,
  );

const viaGateway = (name: string, route: string, method = 'GET') =>
  call<string>(p.gatewayUrl, method, `/v1/deployments/${name}${route}`, { key: t.key });

test('replicas on two hosts are each reached at their own host address: gateway, health checks and metric scrapes', async () => {
  // Host A alone takes the first deployment. It then stops to restart (its replicas run on, as a
  // host with a stable name leaves them), so host B alone takes the second; A comes back and
  // adopts its own. Both hosts then serve the shared launch queue, the scrapes among it.
  const hostA = await startHost('host-a', ADDRESS_A);
  const onA = await deployHttpReplica(p, t.key, 'on-a', { min_replicas: 2, max_replicas: 2 });
  hostA.child.kill('SIGTERM');
  await hostA.exited;
  await startHost('host-b', ADDRESS_B);
  const onB = await deployHttpReplica(p, t.key, 'on-b', {
    min_replicas: 1,
    max_replicas: 2,
    autoscaling: {
      metric: 'CustomMetric',
      custom_metric_name: 'inflight_requests',
      target: 2,
      time_interval_minutes: 0,
    },
  });
  await startHost('host-a', ADDRESS_A);

  const a = await replicasOf(onA.id);
  const b = await replicasOf(onB.id);
  assert.equal(a.length, 2);
  assert.equal(b.length, 1);
  for (const r of a) {
    assert.equal(r.address, ADDRESS_A, 'recorded with its host address');
    assert.match(r.host, /host-a/);
    assert.equal(await answersAt(ADDRESS_A, r.port), true, `on-a's replica answers at ${ADDRESS_A}:${r.port}`);
    assert.equal(await answersAt('127.0.0.1', r.port), false, 'and not at 127.0.0.1 (it listens on its address)');
  }
  assert.equal(b[0].address, ADDRESS_B);
  assert.match(b[0].host, /host-b/);
  assert.equal(await answersAt('127.0.0.1', b[0].port), false);

  // The gateway reaches each deployment on its own host: the replica says where it listens.
  for (const [name, address] of [
    ['on-a', ADDRESS_A],
    ['on-b', ADDRESS_B],
  ]) {
    const res = await viaGateway(name, '/env?name=HOST');
    assert.equal(res.status, 200, `${name}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body, address);
  }

  // CustomMetric: on-b's replica reports 4 in flight (target 2 per replica), so it needs 2. The
  // scrape runs on whichever host takes it and must reach the replica on host B's address.
  assert.equal((await viaGateway('on-b', '/set-metric?value=4', 'POST')).status, 200);
  const scaled = await eventually(
    () => call(p.baseUrl, 'GET', '/v1/deployments/on-b', { key: t.key }).then((r) => r.body),
    (d) => d.desired_replicas === 2 && d.ready_replicas === 2 && d.status === 'Ready',
    60_000,
  );
  assert.equal(scaled.ready_replicas, 2);
  for (const r of await replicasOf(onB.id)) assert.ok([ADDRESS_A, ADDRESS_B].includes(r.address), r.address);
});

test('a container host address must be one IP address of the host', () => {
  const withAddress = (a: string) => loadConfig({ ...process.env, GANTRY_CONTAINER_HOST_ADDRESS: a });
  assert.equal(withAddress('10.0.0.5').containerHostAddress, '10.0.0.5');
  assert.equal(withAddress('fd00::5').containerHostAddress, 'fd00::5');
  assert.equal(
    loadConfig({ ...process.env, GANTRY_CONTAINER_HOST_ADDRESS: undefined }).containerHostAddress,
    '127.0.0.1',
  );
  // Every address at once is no address to reach a replica at; a name would be resolved elsewhere.
  for (const bad of ['0.0.0.0', '::', 'host-a.internal', '10.0.0.5:8080']) {
    assert.throws(
      () => withAddress(bad),
      (err) => err instanceof ConfigError && /GANTRY_CONTAINER_HOST_ADDRESS/.test(err.message),
      bad,
    );
  }
});

test('a container host without a container runtime refuses to start, and says which setting', async () => {
  const w = startProcess('workers/container-host.ts', { GANTRY_CONTAINER_RUNTIME: 'none' });
  const { code } = await w.exited;
  assert.notEqual(code, 0);
  assert.ok(
    w.lines.some((l) => /a container host needs GANTRY_CONTAINER_RUNTIME/.test(JSON.stringify(l))),
    JSON.stringify(w.lines),
  );
});
