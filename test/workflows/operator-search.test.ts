/**
 * The README's searches for operators return what they say, on the real
 * server: one normalized GantryPhase across resources beside each resource's
 * own GantryStatus, search attributes on remediation children, per project.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { createCluster, startClusterPlatform, waitForCluster } from '../helpers/clusters';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startClusterPlatform();
  t = await createTenant(p.db);
});
after(() => p.stop());

async function search(query: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const w of p.temporal.workflow.list({ query })) ids.push(w.workflowId);
  return ids.sort();
}

describe('searching runs in the Temporal UI', () => {
  test('GantryPhase follows a cluster and its remediation through their lives', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const mine = `GantryProjectId = "${t.projectId}"`;
    await eventually(
      () => search(`${mine} AND GantryResourceType = "cluster" AND GantryPhase = "active"`),
      (ids) => ids.includes(`cluster/${c.cluster_id}`),
      10_000,
    );

    const node = ready.gpu_worker_nodes[0];
    const created = await call(
      p.baseUrl,
      'POST',
      `/v1/compute/clusters/${c.cluster_id}/instances/${node.instance_id}/remediations?remediation_id=search-1`,
      { key: t.key, json: { mode: 'REMEDIATION_MODE_REBOOT_VM' } },
    );
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const children = await eventually(
      () => search(`${mine} AND GantryResourceType = "remediation"`),
      (ids) => ids.length === 1,
      10_000,
    );
    assert.deepEqual(children, [`cluster/${c.cluster_id}/remediation/search-1`]);
    // The remediation's search attributes follow its state to its end: a reboot that succeeded is done.
    await eventually(
      () => search(`GantryResourceId = "search-1" AND GantryPhase = "done" AND GantryStatus = "SUCCEEDED"`),
      (ids) => ids.length === 1,
      30_000,
    ).then((ids) => assert.deepEqual(ids, children));
    assert.deepEqual(await search(`GantryResourceId = "search-1" AND GantryPhase = "waiting"`), []);

    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    await eventually(
      () => search(`${mine} AND GantryResourceType = "cluster" AND GantryPhase = "done"`),
      (ids) => ids.includes(`cluster/${c.cluster_id}`),
      20_000,
    );
    assert.deepEqual(
      await search(`GantryProjectId = "proj-of-nobody" AND GantryResourceType = "cluster"`),
      [],
      'another project finds none of it',
    );
  });
});
