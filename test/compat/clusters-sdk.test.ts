/**
 * The official TypeScript SDK's beta.clusters resources (together-ai,
 * pinned) against Gantry, changing nothing but baseURL and apiKey: regions,
 * create, retrieve, list, update, storage volumes, remediations and delete.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { eventually, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { deleteAllClusters, NVIDIA_VERSION_ID, REGION, startClusterPlatform } from '../helpers/clusters';

describe('official SDK: clusters', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;

  before(async () => {
    p = await startClusterPlatform();
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await deleteAllClusters(p, tenant.key);
    await p.stop();
  });

  test('a cluster through its whole life with the SDK', async () => {
    const { regions } = await client.beta.clusters.listRegions();
    const region = regions.find((r) => r.name === REGION)!;
    assert.ok(region.driver_versions.some((d) => d.id === NVIDIA_VERSION_ID));

    const volume = await client.beta.clusters.storage.create({ region: REGION, size_tib: 1, volume_name: 'sdk-vol' });
    assert.equal(volume.status, 'provisioning');
    const { volumes } = await client.beta.clusters.storage.list();
    assert.ok(volumes.some((v) => v.volume_id === volume.volume_id));

    const created = await client.beta.clusters.create({
      cluster_name: 'sdk',
      region: REGION,
      gpu_type: 'H100_SXM',
      num_gpus: 8,
      billing_type: 'ON_DEMAND',
      nvidia_version_id: NVIDIA_VERSION_ID,
      volume_id: volume.volume_id,
    });
    const ready = await eventually(
      () => client.beta.clusters.retrieve(created.cluster_id),
      (c) => c.status === 'Ready',
    );
    assert.equal(ready.volumes[0].volume_id, volume.volume_id);
    const listed = await client.beta.clusters.list();
    assert.ok(listed.clusters.some((c) => c.cluster_id === created.cluster_id));

    const updated = await client.beta.clusters.update(created.cluster_id, { num_gpus: 16 });
    assert.equal(updated.num_gpus, 16);

    const node = ready.gpu_worker_nodes[0];
    const rem = await client.beta.clusters.remediations.create(node.instance_id!, {
      cluster_id: created.cluster_id,
      mode: 'REMEDIATION_MODE_REBOOT_VM',
      reason: 'from the SDK',
    });
    assert.equal(rem.state, 'PENDING');
    const done = await eventually(
      () =>
        client.beta.clusters.remediations.retrieve(rem.id, {
          cluster_id: created.cluster_id,
          instance_id: node.instance_id!,
        }),
      (r) => r.state === 'SUCCEEDED',
    );
    assert.ok(done.end_time);
    const page = await client.beta.clusters.remediations.list(node.instance_id!, { cluster_id: created.cluster_id });
    assert.equal(page.remediations[0].id, rem.id);
    assert.equal(page.has_next, false);
    // The SDK sends array filters comma-separated.
    const filtered = await client.beta.clusters.remediations.list(node.instance_id!, {
      cluster_id: created.cluster_id,
      state: ['FAILED', 'CANCELLED'],
      trigger: ['REMEDIATION_TRIGGER_MANUAL'],
    });
    assert.deepEqual(filtered.remediations, []);

    const deleted = await client.beta.clusters.delete(created.cluster_id);
    assert.equal(deleted.cluster_id, created.cluster_id);
    await eventually(
      () => client.beta.clusters.storage.retrieve(volume.volume_id),
      (v) => v.status === 'available',
    );
    const removed = await client.beta.clusters.storage.delete(volume.volume_id);
    assert.equal(removed.success, true);
  });
});
