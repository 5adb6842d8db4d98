/**
 * A container host whose worker process crashes (SIGKILL) or is shut down to
 * restart (SIGTERM) and comes back under the same GANTRY_CONTAINER_HOST_ID: its
 * replicas outlive the old process, the new worker adopts them, and the
 * deployment re-attaches to the same process instead of starting a second one.
 * Real worker processes, the process runtime.
 */
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../platform/config';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';
import { deployHttpReplica, serves } from '../helpers/deployments';

const HOST = {
  GANTRY_CONTAINER_RUNTIME: 'process',
  GANTRY_SINGLE_TENANT: 'yes',
  GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '1',
};
let p: TestPlatform;
let t: Tenant;
const workers: StartedProcess[] = [];

before(async () => {
  p = await startTestPlatform({ controlWorker: false });
  t = await createTenant(p.db);
});
after(async () => {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGTERM');
  await Promise.all(workers.map((w) => w.exited));
  await p.stop();
});

const api = (method: string, url: string, json?: unknown) => call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });
/** A container host named `hostId` (each test its own: two live processes must never share a name). */
const startHost = async (hostId: string) => {
  const w = startProcess('workers/control.ts', { ...HOST, GANTRY_CONTAINER_HOST_ID: `${hostId}-${process.pid}` });
  workers.push(w);
  await w.waitFor(/control worker polling/);
  return w;
};

describe('a container host restarted under the same name', () => {
  for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
    const how = signal === 'SIGKILL' ? 'crash' : 'graceful shutdown';
    test(`its replica outlives the ${how}, is adopted and supervised again; nothing is started beside it`, async () => {
      await restartedHostKeepsItsReplica(signal, `survives-${signal.toLowerCase()}`);
    });
  }
});

async function restartedHostKeepsItsReplica(signal: 'SIGKILL' | 'SIGTERM', name: string): Promise<void> {
  const first = await startHost(name);
  const ready = await deployHttpReplica(p, t.key, name);
  const [replica] = Object.keys(ready.replica_events);
  const { rows } = await p.db.query<{ port: number }>(
    'SELECT port FROM deployment_replicas WHERE deployment_id = $1 AND replica_id = $2',
    [ready.id, replica],
  );
  const health = () => serves(rows[0].port);
  // What a host writes for its replicas is its own user's only (ownerOnlyFiles): no other account
  // on the machine reads a tenant's output.
  const logFile = path.join(loadConfig().dataDir, 'deployments', ready.id, `${replica}.log`);
  assert.equal(statSync(logFile).mode & 0o777, 0o600, `${logFile} is 0600`);
  assert.equal(statSync(path.dirname(logFile)).mode & 0o777, 0o700);

  first.child.kill(signal);
  await first.exited;
  assert.equal(await health(), true, `the replica outlived its worker (${signal})`);

  const second = await startHost(name);
  // Positive evidence of the re-attachment: the supervisor of the replica runs on the new process.
  const handle = p.temporal.workflow.getHandle(`deployment/${ready.id}`);
  await eventually(
    async () => (await handle.describe()).raw.pendingActivities ?? [],
    (pending) =>
      pending.some(
        (a) =>
          a.activityType?.name === 'superviseReplica' &&
          String(a.lastWorkerIdentity ?? '').includes(`:${second.child.pid}`),
      ),
    60_000,
  );
  const d = (await api('GET', `/deployments/${name}`)).body;
  assert.deepEqual(Object.keys(d.replica_events), [replica], 'no second replica was launched');
  assert.equal(d.replica_events[replica].replica_status, 'Running');
  assert.equal(await health(), true, 'the same process still serves');

  // Still supervised: deleting the deployment stops it through the new worker.
  await api('DELETE', `/deployments/${name}`);
  await eventually(
    () => api('GET', `/deployments/${name}`),
    (r) => r.status === 404,
    30_000,
  );
  assert.equal(await health(), false, 'stopped with its deployment');
  // The next test's launches must land on its own host.
  second.child.kill('SIGTERM');
  await second.exited;
}
