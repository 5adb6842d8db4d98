/**
 * The real process entry points start, serve, and stop cleanly on SIGTERM
 * (workers drain: polling stops and the worker reports it stopped before exit).
 */
import assert from 'node:assert/strict';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { after, describe, test } from 'node:test';
import { createPool } from '../../db/pool';
import { freePort } from '../../platform/ports';
import { call } from '../helpers/platform';
import { startApiProcess, startProcess } from '../helpers/processes';
import { createTenant } from '../helpers/tenants';

// The GPU worker serves the same queue as the in-process test platform: Temporal lists a
// stopped worker's poller for a while, and other tests probe the queues that look live.

describe('process lifecycle', () => {
  const children: ChildProcess[] = [];
  after(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  });

  test('API and workers start from their entry points and exit 0 on SIGTERM', async () => {
    const { api, url: apiUrl } = await startApiProcess();
    const control = startProcess('workers/control.ts', {});
    const gpu = startProcess('workers/gpu.ts', { GANTRY_GPU_TYPES: 'H100_SXM', GANTRY_ACCELERATOR: 'simulated' });
    children.push(api.child, control.child, gpu.child);

    await Promise.all([control.waitFor(/control worker polling/), gpu.waitFor(/SIMULATED accelerator host/)]);

    const db = createPool(process.env.DATABASE_URL!, 1);
    const tenant = await createTenant(db);
    await db.end();
    const res = await call(apiUrl, 'GET', '/v1/whoami', { key: tenant.key });
    assert.equal(res.status, 200);
    assert.equal(res.body.project_id, tenant.projectId);

    for (const p of [api, control, gpu]) p.child.kill('SIGTERM');
    const [a, c, g] = await Promise.all([api.exited, control.exited, gpu.exited]);
    assert.deepEqual(a, { code: 0, signal: null });
    assert.deepEqual(c, { code: 0, signal: null });
    assert.deepEqual(g, { code: 0, signal: null });
    assert.ok(control.lines.some((l) => l.msg === 'control worker stopped'));
    assert.ok(gpu.lines.some((l) => l.msg === 'GPU worker stopped'));
    assert.ok(api.lines.some((l) => l.msg === 'shutting down'));
    // The key used above never reached any process's log.
    const allLogs = JSON.stringify([api.lines, control.lines, gpu.lines]);
    assert.ok(!allLogs.includes(tenant.key));
  });
  test('the API waits for a Temporal namespace that is not there yet, and starts once it is', async () => {
    // As a fresh docker-compose Temporal that takes connections before it serves its namespace.
    const namespace = `late-${Date.now().toString(36)}`;
    const apiPort = String(await freePort());
    const api = startProcess('api/server.ts', { GANTRY_API_PORT: apiPort, TEMPORAL_NAMESPACE: namespace });
    children.push(api.child);
    await api.waitFor(new RegExp(`waiting for Temporal namespace ${namespace}`));
    assert.equal(api.child.exitCode, null, 'still running, not crashed');

    execFileSync(process.env.TEMPORAL_CLI ?? 'temporal', [
      'operator',
      'namespace',
      'create',
      '--address',
      process.env.TEMPORAL_ADDRESS!,
      '--namespace',
      namespace,
    ]);
    await api.waitFor(/API listening/, 90_000);
    assert.equal((await call(`http://127.0.0.1:${apiPort}`, 'GET', '/healthz')).status, 200);
    api.child.kill('SIGTERM');
    assert.equal((await api.exited).code, 0);
  });
});
