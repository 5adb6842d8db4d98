/**
 * Workflows terminated from outside (an operator in the Temporal UI), on the
 * real server. A remediation child terminated while it replaces a node: the
 * remediation ends FAILED, the cluster keeps answering, and deleting it
 * releases the replacement the terminated child had provisioned (the sweep by
 * cluster id); the fleet boots nodes slowly here so the child is surely
 * mid-replacement. A cluster whose own workflow was terminated: DELETE still
 * releases every node held for it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { remediationWorkflowId } from '../../shared/clusters';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { FAST_CLUSTERS, createCluster, eventsOf, waitForCluster } from '../helpers/clusters';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ gpuTypes: ['H100_SXM'], env: { ...FAST_CLUSTERS, GANTRY_FLEET_STEP_MS: '400' } });
  t = await createTenant(p.db);
});
after(() => p.stop());

const heldNodes = async (clusterId: string) =>
  (
    await p.db.query<{ node_id: string }>(
      'SELECT node_id FROM fleet_nodes WHERE cluster_id = $1 AND released_at IS NULL ORDER BY node_id',
      [clusterId],
    )
  ).rows.map((r) => r.node_id);

describe('terminated workflows', () => {
  test('a terminated remediation child ends its remediation FAILED; the cluster serves, and its delete leaves no node held', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready', 60_000);
    const node = ready.gpu_worker_nodes[0];
    const base = `/v1/compute/clusters/${c.cluster_id}/instances/${node.instance_id}/remediations`;
    const created = await call(p.baseUrl, 'POST', `${base}?remediation_id=replace-1`, {
      key: t.key,
      json: { mode: 'REMEDIATION_MODE_VM_ONLY', reason: 'replace it' },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));

    // The replacement is provisioned and booting (slowly) when the child is terminated.
    await eventually(
      () => heldNodes(c.cluster_id),
      (nodes) => nodes.length === 3,
      20_000,
    );
    await p.temporal.workflow.getHandle(remediationWorkflowId(c.cluster_id, 'replace-1')).terminate('operator');

    const failed = await eventually(
      () => call(p.baseUrl, 'GET', `${base}/replace-1`, { key: t.key }),
      (r) => r.body.state === 'FAILED',
      20_000,
    );
    assert.match(failed.body.error_message, /terminated/i);
    const after = await waitForCluster(p, t.key, c.cluster_id, (x) => eventsOf(x, 'RemediationFailed').length === 1);
    assert.equal(after.gpu_worker_nodes.length, 1);

    // Still serving: a resize is accepted and carried out.
    const resized = await call(p.baseUrl, 'PUT', `/v1/compute/clusters/${c.cluster_id}`, {
      key: t.key,
      json: { num_gpus: 16 },
    });
    assert.equal(resized.status, 200, JSON.stringify(resized.body));
    await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => x.status === 'Ready' && x.gpu_worker_nodes.length === 2,
      60_000,
    );

    const deleted = await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    assert.equal(deleted.status, 200);
    await eventually(
      () => p.temporal.workflow.getHandle(`cluster/${c.cluster_id}`).describe(),
      (d) => d.status.name === 'COMPLETED',
      30_000,
    );
    assert.deepEqual(await heldNodes(c.cluster_id), [], 'the orphaned replacement was released too');
  });

  test('a cluster whose workflow is gone is still torn down by DELETE', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready', 60_000);
    assert.equal((await heldNodes(c.cluster_id)).length, 2, 'a control-plane node and a worker');
    await p.temporal.workflow.getHandle(`cluster/${c.cluster_id}`).terminate('operator');

    const deleted = await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
    const gone = await waitForCluster(p, t.key, c.cluster_id, (x) => !!x.deleted_at, 30_000);
    assert.equal(gone.status, 'Deleting');
    assert.deepEqual(await heldNodes(c.cluster_id), [], 'nothing held for it is left');
    const again = await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    assert.equal(again.status, 200, 'deleting it again is done already');
  });
});
