/**
 * The self-check, end to end: the API starts a workflow on real Temporal,
 * activities on the control queue and on gpu.H100_SXM (a simulated host) write
 * PostgreSQL, the API reads it back. gpu.B200_SXM has no worker and must be
 * reported through its schedule-to-start timeout, not waited on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Worker } from '@temporalio/worker';
import { SA_PROJECT_ID, SA_RESOURCE_ID, SA_RESOURCE_TYPE, SA_STATUS } from '../../shared/search-attributes';
import { workflowSource } from '../../workers/workflow-code';
import { call, eventually, startApiWithoutTemporal, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('system self-check workflow', () => {
  let p: TestPlatform;
  let admin: Tenant;
  let otherAdmin: Tenant;

  before(async () => {
    p = await startTestPlatform({ gpuTypes: ['H100_SXM'], queueWaitSeconds: 2 });
    admin = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin' });
    otherAdmin = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin' });
  });
  after(() => p.stop());

  const finished = (id: string, key = admin.key) =>
    eventually(
      () => call(p.baseUrl, 'GET', `/v1/system/self-checks/${id}`, { key }),
      (r) => r.status === 200 && r.body.status !== 'running',
    );

  let failingCheckId = '';

  test('reports a live GPU queue as ok and a queue without a worker as no_worker', async () => {
    const created = await call(p.baseUrl, 'POST', '/v1/system/self-checks', {
      key: admin.key,
      json: { gpu_types: ['H100_SXM', 'B200_SXM'] },
    });
    assert.equal(created.status, 201);
    assert.equal(created.body.status, 'running');
    assert.match(created.body.id, /^sc-/);
    assert.equal(created.body.workflow_id, `system-self-check/${created.body.id}`);
    assert.deepEqual(
      created.body.probes.map((q: any) => [q.task_queue, q.status]),
      [
        ['control', 'pending'],
        ['gpu.B200_SXM', 'pending'],
        ['gpu.H100_SXM', 'pending'],
      ],
    );
    failingCheckId = created.body.id;

    const done = await finished(created.body.id);
    assert.equal(done.body.status, 'failed');
    assert.ok(done.body.completed_at);
    const probe = (q: string) => done.body.probes.find((x: any) => x.task_queue === q);

    assert.equal(probe('control').status, 'ok');
    assert.equal(probe('control').host.task_queue, 'control');

    const h100 = probe('gpu.H100_SXM');
    assert.equal(h100.status, 'ok');
    assert.equal(h100.host.accelerator, 'simulated');
    assert.equal(h100.host.task_queue, 'gpu.H100_SXM');
    assert.match(h100.host.note, /no physical GPU/);
    assert.equal(typeof h100.latency_ms, 'number');

    const b200 = probe('gpu.B200_SXM');
    assert.equal(b200.status, 'no_worker');
    assert.match(b200.detail, /No worker picked up work on gpu\.B200_SXM within 2s/);
    assert.match(b200.detail, /GANTRY_GPU_TYPES=B200_SXM/);
  });

  test('operators find the run in Temporal by its id, search attributes and summary', async () => {
    const handle = p.temporal.workflow.getHandle(`system-self-check/${failingCheckId}`);
    // The row is final a moment before the run closes (its last activity writes it): wait for the run.
    await handle.result();
    const d = await handle.describe();
    assert.equal(d.type, 'systemSelfCheck');
    assert.equal(d.taskQueue, 'control');
    assert.equal(d.status.name, 'COMPLETED');
    assert.equal(d.typedSearchAttributes.get(SA_PROJECT_ID), admin.projectId);
    assert.equal(d.typedSearchAttributes.get(SA_RESOURCE_TYPE), 'system-self-check');
    assert.equal(d.typedSearchAttributes.get(SA_RESOURCE_ID), failingCheckId);
    assert.equal(d.typedSearchAttributes.get(SA_STATUS), 'failed');
    assert.match(
      (await d.staticSummary()) ?? '',
      new RegExp(`Self-check ${failingCheckId}: control, gpu.H100_SXM, gpu.B200_SXM`),
    );

    // The same run is found through a visibility query on the search attribute.
    const found = await eventually(
      async () => {
        const ids: string[] = [];
        for await (const w of p.temporal.workflow.list({ query: `GantryResourceId = "${failingCheckId}"` })) {
          ids.push(w.workflowId);
        }
        return ids;
      },
      (ids) => ids.length === 1,
      10_000,
    );
    assert.deepEqual(found, [`system-self-check/${failingCheckId}`]);
  });

  test('the finished run replays against the current workflow code', async () => {
    const history = await p.temporal.workflow.getHandle(`system-self-check/${failingCheckId}`).fetchHistory();
    await Worker.runReplayHistory(workflowSource(), history, `system-self-check/${failingCheckId}`);
  });

  test('without gpu_types it probes the GPU queues that have live workers, and passes', async () => {
    const created = await call(p.baseUrl, 'POST', '/v1/system/self-checks', { key: admin.key, json: {} });
    assert.equal(created.status, 201);
    const queues = created.body.probes.map((q: any) => q.task_queue);
    assert.ok(queues.includes('control'));
    assert.ok(queues.includes('gpu.H100_SXM'));
    assert.ok(!queues.includes('gpu.B200_SXM'));
    const done = await finished(created.body.id);
    assert.equal(done.body.status, 'passed', JSON.stringify(done.body.probes));

    const list = await call(p.baseUrl, 'GET', '/v1/system/self-checks?limit=10', { key: admin.key });
    assert.equal(list.status, 200);
    assert.equal(list.body.object, 'list');
    assert.deepEqual(
      list.body.data.map((c: any) => c.id),
      [created.body.id, failingCheckId],
    );
  });

  test("another project's key gets 404 for the check and does not see it listed", async () => {
    const res = await call(p.baseUrl, 'GET', `/v1/system/self-checks/${failingCheckId}`, { key: otherAdmin.key });
    assert.equal(res.status, 404);
    assert.equal(res.body.error.type, 'not_found_error');
    const list = await call(p.baseUrl, 'GET', '/v1/system/self-checks', { key: otherAdmin.key });
    assert.deepEqual(list.body.data, []);
  });

  test('system status reports the database, Temporal and which queues have pollers', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/system/status', { key: admin.key });
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'ok');
    assert.equal(res.body.database.ok, true);
    assert.deepEqual(res.body.database.migrations.slice(0, 2), ['001_accounts', '002_system_self_checks']);
    assert.equal(res.body.temporal.ok, true);
    const q = (name: string) => res.body.task_queues.find((x: any) => x.name === name);
    assert.ok(q('control').workflow_pollers >= 1);
    assert.ok(q('control').activity_pollers >= 1);
    assert.ok(q('gpu.H100_SXM').activity_pollers >= 1);
    assert.match(q('gpu.H100_SXM').pollers[0].identity, /simulated/);
    assert.equal(q('gpu.B200_SXM').activity_pollers, 0);
  });

  test('when Temporal is unreachable, status says degraded and starting work is a 503', async () => {
    // An API wired to a Temporal address where nothing listens.
    const api = await startApiWithoutTemporal(p);
    const base = api.baseUrl;
    try {
      const status = await call(base, 'GET', '/v1/system/status', { key: admin.key });
      assert.equal(status.status, 200);
      assert.equal(status.body.status, 'degraded');
      assert.equal(status.body.temporal.ok, false);
      assert.equal(status.body.database.ok, true);

      const start = await call(base, 'POST', '/v1/system/self-checks', {
        key: admin.key,
        json: { gpu_types: ['H100_SXM'] },
      });
      assert.equal(start.status, 503);
      assert.equal(start.body.error.type, 'service_unavailable');
      assert.ok(start.headers.get('retry-after'));
      // Nothing dangles: the row written before the failed start is gone.
      const list = await call(p.baseUrl, 'GET', '/v1/system/self-checks?limit=100', { key: admin.key });
      assert.ok(list.body.data.every((c: any) => c.status !== 'running'));
    } finally {
      api.close();
    }
  });
});
