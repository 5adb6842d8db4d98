/**
 * A cluster's life through the API, on the local fleet simulator: create to
 * Ready through every phase, credentials, the count invariants, delete.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import {
  deleteAllClusters,
  createCluster,
  eventsOf,
  phasesOf,
  startClusterPlatform,
  waitForCluster,
} from '../helpers/clusters';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startClusterPlatform();
  t = await createTenant(p.db);
});
after(async () => {
  await deleteAllClusters(p, t.key);
  await p.stop();
});

describe('cluster lifecycle', () => {
  test('create to Ready walks every provisioning phase, with node phases and a kubeconfig', async () => {
    const created = await createCluster(p, t.key, {
      cluster_name: 'happy',
      num_gpus: 16,
      add_ons: [
        { add_on_type: 'dashboard', name: 'dash', config: { dashboard: { enabled: true } } },
        { add_on_type: 'ingress', name: 'off', config: { ingress: { enabled: false } } },
      ],
    });
    assert.deepEqual(created.add_ons, [], 'add-ons show once installed');
    assert.match(created.cluster_id, /^cl-[0-9a-f]{12}$/);
    assert.equal(created.status, 'WaitingForControlPlaneNodes');
    assert.deepEqual(phasesOf(created), ['QUEUED']);
    const c = await waitForCluster(p, t.key, created.cluster_id, (c) => c.status === 'Ready');
    assert.deepEqual(phasesOf(c), [
      'QUEUED',
      'SCHEDULED',
      'WAITING_FOR_CONTROL_PLANE_NODES',
      'WAITING_FOR_SUBNET',
      'WAITING_FOR_DATA_PLANE_NODES',
      'INSTALLING_DRIVERS',
      'RUNNING_ACCEPTANCE_TESTS',
      'RUNNING_NCCL_TESTS',
      'READY',
    ]);
    assert.equal(c.gpu_worker_nodes.length, 2);
    for (const n of c.gpu_worker_nodes) {
      assert.equal(n.num_gpus, 8);
      assert.equal(n.status, 'Ready');
      assert.deepEqual(
        n.phase_transitions.map((x: any) => x.phase),
        [
          'NODE_PHASE_PENDING',
          'NODE_PHASE_SCHEDULING',
          'NODE_PHASE_BOOTING',
          'NODE_PHASE_BOOTSTRAPPING',
          'NODE_PHASE_RUNNING',
        ],
      );
      assert.match(n.host_name, /^sim-gpu-/, 'simulated nodes say so in their names');
    }
    assert.equal(c.control_plane_ready, true);
    assert.ok(c.first_ready_at);
    assert.equal(c.num_gpus, 16);
    assert.equal(c.num_reserved_gpus + c.num_capacity_pool_gpus, 0, 'ON_DEMAND: nothing reserved, no pool');
    assert.equal(c.cuda_version, '12.6');
    assert.equal(c.nvidia_driver_version, '560');
    assert.equal(c.os_image, 'ubuntu-22.04');
    const kubeconfig = Buffer.from(c.kube_config, 'base64').toString('utf8');
    assert.match(kubeconfig, /kind: Config/, 'kube_config is the kubeconfig, base64');
    assert.deepEqual(
      c.add_ons.map((a: any) => [a.name, a.add_on_type]),
      [['dash', 'dashboard']],
      'only enabled add-ons are returned',
    );

    const creds = await call(p.baseUrl, 'GET', `/v1/compute/clusters/${c.cluster_id}/credentials`, { key: t.key });
    assert.equal(creds.status, 200);
    assert.match(creds.headers.get('content-type') ?? '', /yaml/);
    assert.equal(creds.body, kubeconfig);

    const listed = await call(p.baseUrl, 'GET', '/v1/compute/clusters', { key: t.key });
    assert.ok(listed.body.clusters.some((x: any) => x.cluster_id === c.cluster_id));

    const del = await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    assert.deepEqual(del.body, { cluster_id: c.cluster_id });
    const gone = await waitForCluster(p, t.key, c.cluster_id, (c) => !!c.deleted_at);
    assert.equal(gone.status, 'Deleting');
    assert.equal(phasesOf(gone).at(-1), 'DELETING');
    assert.equal(gone.gpu_worker_nodes.length, 0);
    assert.equal(gone.deleted_gpu_worker_nodes.length, 2);
    for (const n of gone.deleted_gpu_worker_nodes) assert.ok(n.deleted_at);
    assert.match(eventsOf(gone, 'NodeReleased')[0].message, /cordoned, drained and released: deleted through the API/);
    const after = await call(p.baseUrl, 'GET', '/v1/compute/clusters', { key: t.key });
    assert.ok(!after.body.clusters.some((x: any) => x.cluster_id === c.cluster_id), 'deleted clusters leave the list');
  });

  test('with no worker on its GPU queue the cluster says so, and a delete still stops the bring-up', async () => {
    // This platform's GPU worker serves gpu.H100_SXM only.
    const c = await createCluster(p, t.key, { gpu_type: 'H200_SXM', num_gpus: 8 });
    const waiting = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => eventsOf(x, 'AcceleratorQueueUnserved').length > 0,
    );
    assert.equal(waiting.status, 'RunningAcceptanceTests');
    assert.match(eventsOf(waiting, 'AcceleratorQueueUnserved')[0].message, /gpu\.H200_SXM.*GANTRY_GPU_TYPES=H200_SXM/);
    const del = await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    assert.equal(del.status, 200);
    const gone = await waitForCluster(p, t.key, c.cluster_id, (x) => !!x.deleted_at);
    assert.equal(phasesOf(gone).at(-1), 'DELETING');
    assert.ok(!phasesOf(gone).includes('READY'));
    assert.equal(gone.gpu_worker_nodes.length, 0);
  });
});
