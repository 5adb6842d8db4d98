/**
 * Deployments whose workflow ended without deleting them (an operator
 * terminated it in the Temporal UI), on the real server with the process
 * runtime: no replica runs on unowned, and DELETE still removes the deployment.
 * Hosts keep a replica whose supervisor detached for GANTRY_REPLICA_ADOPTION_SECONDS
 * (6 s here) so a continued run can re-attach; nobody re-attaches to a
 * terminated run's replica, so its host stops it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { deployHttpReplica, serves } from '../helpers/deployments';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_REPLICA_ADOPTION_SECONDS: '6' } });
  t = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown) => call(p.baseUrl, method, `/v1${url}`, { key: t.key, json });
async function deployAndTerminate(name: string) {
  const ready = await deployHttpReplica(p, t.key, name);
  const { rows } = await p.db.query<{ replica_id: string; port: number }>(
    `SELECT replica_id, port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
    [ready.id],
  );
  assert.equal(rows.length, 1);
  await p.temporal.workflow.getHandle(`deployment/${ready.id}`).terminate('an operator terminated it');
  return { id: ready.id, replica: rows[0] };
}

describe('deployments whose workflow ended', () => {
  test('the replica of a terminated deployment is stopped by its host when nobody re-attaches', async () => {
    const { replica } = await deployAndTerminate('left-behind');
    const shown = await eventually(
      () => api('GET', '/deployments/left-behind').then((r) => r.body),
      (d) => d.replica_events?.[replica.replica_id]?.replica_status === 'Terminated',
      30_000,
    );
    assert.equal(shown.replica_events[replica.replica_id].replica_status_reason, 'Unsupervised');
    assert.equal(await serves(replica.port), false, 'the process is gone');
    const deleted = await api('DELETE', '/deployments/left-behind');
    assert.equal(deleted.status, 200);
    await eventually(
      () => api('GET', '/deployments/left-behind'),
      (r) => r.status === 404,
      30_000,
    );
  });

  test('DELETE right after the workflow was terminated stops the replica and removes the deployment', async () => {
    const { replica } = await deployAndTerminate('deleted-after-terminate');
    assert.equal(await serves(replica.port), true, 'still serving: the host keeps it for a while');
    const deleted = await api('DELETE', '/deployments/deleted-after-terminate');
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    await eventually(
      () => api('GET', '/deployments/deleted-after-terminate'),
      (r) => r.status === 404,
      30_000,
    );
    assert.equal(await serves(replica.port), false, 'the process is gone');
    const again = await api('DELETE', '/deployments/deleted-after-terminate');
    assert.equal(again.status, 404);
  });
});
