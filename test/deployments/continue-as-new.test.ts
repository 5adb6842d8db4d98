/**
 * A long-lived deployment continues as new without touching its replicas:
 * the new run takes over supervising the same processes, so a replica that
 * dies afterwards is still replaced, and delete still stops everything.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const SERVER = path.resolve(__dirname, '../../examples/http-replica/server.mjs');
let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_DEPLOYMENT_ROUNDS_PER_RUN: '3' } });
  t = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown) => call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });
const get = () => api('GET', '/deployments/long-lived').then((r) => r.body);
const running = async (id: string) =>
  (
    await p.db.query<{ replica_id: string; port: number }>(
      `SELECT replica_id, port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running' ORDER BY replica_id`,
      [id],
    )
  ).rows;

describe('deployment continue-as-new', () => {
  test('replicas keep running across runs and are still supervised', async () => {
    await api('POST', '/deployments', {
      name: 'long-lived',
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, SERVER],
      health_check_path: '/health',
      min_replicas: 1,
      max_replicas: 3,
      termination_grace_period_seconds: 2,
    });
    const ready = await eventually(get, (d) => d.status === 'Ready', 30_000);
    const [first] = await running(ready.id);
    const handle = p.temporal.workflow.getHandle(`deployment/${ready.id}`);
    const firstRun = (await handle.describe()).runId;
    // Changes that cost rounds: up to 2 and back to 1, then a description.
    await api('PATCH', '/deployments/long-lived', { max_replicas: 2 });
    await api('PATCH', '/deployments/long-lived', { description: 'round three' });
    await api('PATCH', '/deployments/long-lived', { description: 'round four' });
    await eventually(
      () => handle.describe(),
      (d) => d.runId !== firstRun,
      20_000,
    );
    // The new run supervises the replica: its superviseReplica activity has started and heartbeated
    // (positive evidence that a crash from now on is the new run's to see).
    await eventually(
      async () => (await handle.describe()).raw.pendingActivities ?? [],
      (pending) =>
        pending.some(
          (a) =>
            a.activityType?.name === 'superviseReplica' &&
            a.lastHeartbeatTime !== null &&
            a.lastHeartbeatTime !== undefined,
        ),
      20_000,
    );
    // The same process still serves, and it is still watched: kill it, it is replaced.
    assert.equal((await fetch(`http://127.0.0.1:${first.port}/health`)).status, 200);
    const after = await get();
    assert.equal(after.replica_events[first.replica_id].replica_status, 'Running', 'not stopped by the hand-over');
    await fetch(`http://127.0.0.1:${first.port}/crash`, { method: 'POST' });
    const healed = await eventually(
      get,
      (d) =>
        d.replica_events[first.replica_id]?.replica_status === 'Exited' &&
        d.ready_replicas === 1 &&
        d.status === 'Ready',
      30_000,
    );
    assert.equal(healed.ready_replicas, 1);
    const [second] = await running(healed.id);
    await api('DELETE', '/deployments/long-lived');
    await eventually(
      () => api('GET', '/deployments/long-lived'),
      (r) => r.status === 404,
      30_000,
    );
    await assert.rejects(fetch(`http://127.0.0.1:${second.port}/health`));
  });

  test('a change made after continue-as-new shows in the deployment (the read model does not freeze)', async () => {
    await api('POST', '/deployments', {
      name: 'changes-after-handover',
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, SERVER],
      health_check_path: '/health',
      min_replicas: 1,
      max_replicas: 2,
      termination_grace_period_seconds: 1,
    });
    const ready = await eventually(
      () => api('GET', '/deployments/changes-after-handover').then((r) => r.body),
      (d) => d.status === 'Ready',
      30_000,
    );
    const handle = p.temporal.workflow.getHandle(`deployment/${ready.id}`);
    const firstRun = (await handle.describe()).runId;
    for (let i = 0; i < 8; i++) {
      const r = await api('PATCH', '/deployments/changes-after-handover', { description: `change ${i}` });
      assert.equal(r.status, 200);
    }
    await eventually(
      () => handle.describe(),
      (d) => d.runId !== firstRun,
      20_000,
    );
    // The continued run still says what it is and whose (the static summary stays with the first run).
    const memo = (await handle.describe()).memo;
    assert.equal(memo?.resource, 'changes-after-handover');
    assert.equal(memo?.project, t.projectSlug);
    assert.match(String(memo?.summary), /^Deployment changes-after-handover/);
    const changed = await api('PATCH', '/deployments/changes-after-handover', { min_replicas: 2, max_replicas: 3 });
    assert.equal(changed.status, 200);
    const shown = await eventually(
      () => api('GET', '/deployments/changes-after-handover').then((r) => r.body),
      // ready_replicas comes from the replicas' own health reports and can reach 2 a moment before
      // the workflow projects Ready, so wait for both.
      (d) =>
        d.min_replicas === 2 &&
        d.max_replicas === 3 &&
        d.ready_replicas === 2 &&
        d.desired_replicas === 2 &&
        d.status === 'Ready',
      30_000,
    );
    assert.equal(shown.description, 'change 7');
    await api('DELETE', '/deployments/changes-after-handover');
    await eventually(
      () => api('GET', '/deployments/changes-after-handover'),
      (r) => r.status === 404,
      30_000,
    );
  });
});
