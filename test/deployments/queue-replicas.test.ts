/**
 * The queue and deployments together: the example queue worker runs as the
 * replicas of a deployment (its API key reaches it as a secret). A replica
 * killed (SIGKILL) in the middle of a job loses the claim; the job runs again
 * on another replica, `retries` is 1, and `info` keeps what the first attempt
 * reported. The deployment replaces the dead replica.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const ROOT = path.resolve(__dirname, '../..');
let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown) => call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });

describe('queue workers as deployment replicas', () => {
  test('a replica killed mid-job: another replica finishes it, info keeps the first attempt', async () => {
    assert.equal((await api('POST', '/deployments/secrets', { name: 'queue-key', value: t.key })).status, 200);
    const dep = await api('POST', '/deployments', {
      name: 'jobs',
      image: 'example/queue-worker:1',
      gpu_type: 'h100-80gb',
      command: [
        process.execPath,
        // The replica's working directory is its own root, so the loader is named by path.
        '--import',
        path.join(ROOT, 'node_modules/tsx/dist/loader.mjs'),
        path.join(ROOT, 'examples/queue-worker/worker.ts'),
      ],
      health_check_path: '/health',
      min_replicas: 2,
      termination_grace_period_seconds: 1,
      environment_variables: [
        { name: 'GANTRY_BASE_URL', value: p.baseUrl },
        { name: 'GANTRY_API_KEY', value_from_secret: 'queue-key' },
        // The job reports every second: room for a live replica, a short wait for a dead one's claim.
        { name: 'CLAIM_TIMEOUT_SECONDS', value: '3' },
      ],
    });
    assert.equal(dep.status, 200, JSON.stringify(dep.body));
    await eventually(
      () => api('GET', '/deployments/jobs').then((r) => r.body),
      (d) => d.status === 'Ready' && d.ready_replicas === 2,
      60_000,
    );

    const submitted = await api('POST', '/queue/submit', {
      model: 'jobs',
      payload: { op: 'sleep', ms: 4000, steps: 4 },
      info: { user: 'u1' },
    });
    assert.equal(submitted.status, 200);
    const id = submitted.body.request_id;
    const status = () => api('GET', `/queue/status?model=jobs&request_id=${id}`).then((r) => r.body);
    const first = await eventually(status, (s) => s.info.step_1_by !== undefined, 20_000);
    const victim = first.info.attempt_0_by as string;
    assert.ok(victim.startsWith(`${dep.body.id}-`), `a replica of the deployment took the job (${victim})`);

    const logs = await api('GET', `/deployments/jobs/logs?replica_id=${victim}`);
    const started = logs.body.lines.map((l: string) => JSON.parse(l)).find((l: { pid?: number }) => l.pid);
    process.kill(started.pid, 'SIGKILL');

    const done = await eventually(status, (s) => s.status === 'done', 30_000);
    assert.equal(done.retries, 1);
    assert.equal(done.info.user, 'u1', 'info from submit');
    assert.equal(done.info.attempt_0_by, victim, 'what the first attempt reported is kept');
    assert.ok(done.info.attempt_1_by && done.info.attempt_1_by !== victim, 'the retry ran on another replica');
    assert.equal(done.info.progress, 1);
    assert.deepEqual(done.outputs, { slept_ms: 4000 });

    const healed = await eventually(
      () => api('GET', '/deployments/jobs').then((r) => r.body),
      (d) => d.ready_replicas === 2 && d.replica_events[victim]?.replica_status === 'Exited',
      30_000,
    );
    assert.match(healed.replica_events[victim].replica_status_message, /SIGKILL/);

    assert.equal((await api('DELETE', '/deployments/jobs')).status, 200);
    await eventually(
      () => api('GET', '/deployments/jobs').then((r) => r.status),
      (s) => s === 404,
      30_000,
    );
  });
});
