/** Every create and update rule of the spec answers 400 naming its field; regions list what is usable. */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import {
  deleteAllClusters,
  clusterBody,
  createCluster,
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

const future = (s: number) => new Date(Date.now() + s * 1000).toISOString();

async function rejected(extra: Record<string, unknown>, omit: string[] = []) {
  const body = clusterBody(extra);
  for (const k of omit) delete body[k];
  const res = await call(p.baseUrl, 'POST', '/v1/compute/clusters', { key: t.key, json: body });
  assert.equal(res.status, 400, JSON.stringify(res.body));
  return res.body.error;
}

describe('cluster create rules', () => {
  test('regions list GPU types and driver images, say which are usable, and carry no prices', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/compute/regions', { key: t.key });
    assert.equal(res.status, 200);
    const east = res.body.regions.find((r: any) => r.name === 'sim-us-east-1');
    assert.ok(east.supported_instance_types.includes('H100_SXM'));
    assert.ok(east.driver_versions.some((d: any) => d.id.endsWith('ubuntu-22.04') && d.cuda_version === '12.6'));
    assert.doesNotMatch(JSON.stringify(res.body), /price/i);
    const wrong = await call(p.baseUrl, 'GET', '/v1/compute/clusters/regions', { key: t.key });
    assert.equal(wrong.status, 400);
  });

  const cases: Array<[string, Record<string, unknown>, string[], string]> = [
    ['num_gpus not a multiple of 8', { num_gpus: 12 }, [], 'num_gpus'],
    ['unknown region', { region: 'mars-1' }, [], 'region'],
    [
      'region closed to new clusters',
      { region: 'sim-ap-closed-1', nvidia_version_id: 'sim-ap-closed-1-cuda12.4-drv550-ubuntu-22.04' },
      [],
      'region',
    ],
    ['GPU type not in the region', { gpu_type: 'L40_PCIE' }, [], 'gpu_type'],
    ['no driver selector at all', {}, ['nvidia_version_id'], 'nvidia_version_id'],
    [
      'nvidia_version_id of another region',
      { nvidia_version_id: 'sim-eu-north-1-cuda12.6-drv560-ubuntu-22.04' },
      [],
      'nvidia_version_id',
    ],
    [
      'legacy cuda_version without the driver',
      { cuda_version: '12.6' },
      ['nvidia_version_id'],
      'nvidia_driver_version',
    ],
    [
      'legacy pair that the region lacks',
      { cuda_version: '11.8', nvidia_driver_version: '520' },
      ['nvidia_version_id'],
      'cuda_version',
    ],
    [
      'legacy pair and an id that disagree',
      { cuda_version: '12.4', nvidia_driver_version: '550' },
      [],
      'nvidia_version_id',
    ],
    ['capacity-pool GPUs without a pool', { num_capacity_pool_gpus: 8 }, [], 'num_capacity_pool_gpus'],
    [
      'capacity-pool GPUs above num_gpus',
      { capacity_pool_id: 'pool-1', num_capacity_pool_gpus: 24 },
      [],
      'num_capacity_pool_gpus',
    ],
    ['reserved GPUs on an on-demand cluster', { num_reserved_gpus: 8 }, [], 'num_reserved_gpus'],
    ['RESERVED without duration_days or an end', { billing_type: 'RESERVED' }, [], 'duration_days'],
    [
      'RESERVED with both duration_days and an end',
      { billing_type: 'RESERVED', duration_days: 7, reservation_end_time: future(86_400) },
      [],
      'reservation_end_time',
    ],
    ['num_gpus not a multiple of 8', { num_gpus: 12 }, [], 'num_gpus'],
    [
      'RESERVED counts that do not add up',
      { billing_type: 'RESERVED', duration_days: 7, num_reserved_gpus: 8 },
      [],
      'num_reserved_gpus',
    ],
    ['SLURM without shared memory size', { cluster_type: 'SLURM' }, [], 'slurm_shm_size_gib'],
    [
      'OIDC on SLURM',
      {
        cluster_type: 'SLURM',
        slurm_shm_size_gib: 64,
        oidc_config: {
          issuer_url: 'https://idp',
          client_id: 'c',
          username_claim: 'sub',
          username_prefix: 'o:',
          group_claim: 'groups',
          group_prefix: 'o:',
        },
      },
      [],
      'oidc_config',
    ],
    [
      'traefik on SLURM',
      { cluster_type: 'SLURM', slurm_shm_size_gib: 64, install_traefik: true },
      [],
      'install_traefik',
    ],
    ['auto_scale without a maximum', { auto_scale: true }, [], 'auto_scale_max_gpus'],
    ['deprecated auto_scaled without a maximum', { auto_scaled: true }, [], 'auto_scale_max_gpus'],
    ['auto-scale maximum below num_gpus', { auto_scale: true, auto_scale_max_gpus: 8 }, [], 'auto_scale_max_gpus'],
    ['SCHEDULED_CAPACITY without an end', { billing_type: 'SCHEDULED_CAPACITY' }, [], 'reservation_end_time'],
    [
      'reservation that ends before it starts',
      { billing_type: 'SCHEDULED_CAPACITY', reservation_start_time: future(600), reservation_end_time: future(300) },
      [],
      'reservation_end_time',
    ],
    ['preemptible GPUs not a multiple of 8', { num_preemptible_gpus: 4 }, [], 'num_preemptible_gpus'],
    ['unknown add-on type', { add_ons: [{ add_on_type: 'crypto-miner', name: 'x' }] }, [], 'add_ons[0].add_on_type'],
    ['missing cluster_name', {}, ['cluster_name'], 'cluster_name'],
  ];
  for (const [name, extra, omit, param] of cases) {
    test(`400 naming ${param}: ${name}`, async () => {
      const err = await rejected(extra, omit);
      assert.equal(err.param, param, err.message);
      assert.ok(err.message.length > 10);
    });
  }

  test('the legacy pair: a bare CUDA value selects ubuntu-22.04, an OS-suffixed one is honoured', async () => {
    const bare = await createCluster(p, t.key, {
      nvidia_version_id: undefined,
      cuda_version: '12.6',
      nvidia_driver_version: '560',
    });
    assert.equal(bare.os_image, 'ubuntu-22.04');
    assert.equal(bare.nvidia_driver_version_id, 'sim-us-east-1-cuda12.6-drv560-ubuntu-22.04');
    const suffixed = await createCluster(p, t.key, {
      nvidia_version_id: 'sim-us-east-1-cuda12.8-drv570-ubuntu-24.04',
      cuda_version: '12.8-ubuntu-24.04',
      nvidia_driver_version: '570',
    });
    assert.equal(suffixed.os_image, 'ubuntu-24.04');
    for (const c of [bare, suffixed])
      await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });

  test('RESERVED defaults num_reserved_gpus to num_gpus minus the pool; counts always add up', async () => {
    const c = await createCluster(p, t.key, {
      billing_type: 'RESERVED',
      duration_days: 30,
      num_gpus: 24,
      capacity_pool_id: 'pool-a',
      num_capacity_pool_gpus: 8,
    });
    assert.equal(c.num_reserved_gpus, 16);
    assert.equal(c.num_capacity_pool_gpus, 8);
    assert.equal(c.num_reserved_gpus + c.num_capacity_pool_gpus, c.num_gpus);
    assert.equal(c.duration_hours, 720);
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.equal(ready.gpu_worker_nodes.length, 3);

    // Update rules, checked by the workflow's validator against the cluster as it is.
    const put = (json: unknown) => call(p.baseUrl, 'PUT', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key, json });
    const bad = await put({ num_capacity_pool_gpus: 32 });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'num_capacity_pool_gpus');
    const notMultiple = await put({ num_gpus: 20 });
    assert.equal(notMultiple.body.error.param, 'num_gpus');
    const flavour = await put({ cluster_type: 'SLURM' });
    assert.equal(flavour.body.error.param, 'cluster_type');
    const past = await put({ reservation_end_time: new Date(Date.now() - 1000).toISOString() });
    assert.equal(past.body.error.param, 'reservation_end_time');
    const ok = await put({ num_reserved_gpus: 8 });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.num_gpus, 16, 'num_gpus follows reserved + pool');
    assert.equal(ok.body.num_reserved_gpus + ok.body.num_capacity_pool_gpus, ok.body.num_gpus);
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });

  test('RESERVED until a reservation_end_time (no duration_days); num_gpus 0 is a control plane only', async () => {
    const end = future(3 * 86_400);
    const reserved = await createCluster(p, t.key, { billing_type: 'RESERVED', reservation_end_time: end });
    assert.equal(reserved.billing_type, 'RESERVED');
    assert.equal(Date.parse(reserved.reservation_end_time), Date.parse(end));
    assert.equal(reserved.num_reserved_gpus, reserved.num_gpus);

    const empty = await createCluster(p, t.key, { num_gpus: 0 });
    const ready = await waitForCluster(p, t.key, empty.cluster_id, (x) => x.status === 'Ready');
    assert.equal(ready.num_gpus, 0);
    assert.deepEqual(ready.gpu_worker_nodes, []);
    assert.equal(ready.control_plane_nodes.length > 0, true);
    for (const id of [reserved.cluster_id, empty.cluster_id]) {
      await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${id}`, { key: t.key });
    }
  });

  test('update rules on an on-demand cluster: no reserved GPUs, no pool, no reservation end', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const put = (json: unknown) => call(p.baseUrl, 'PUT', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key, json });
    assert.equal((await put({ num_reserved_gpus: 8 })).body.error.param, 'num_reserved_gpus');
    assert.equal((await put({ num_capacity_pool_gpus: 8 })).body.error.param, 'num_capacity_pool_gpus');
    assert.equal((await put({ reservation_end_time: future(3600) })).body.error.param, 'reservation_end_time');
    assert.equal((await put({ num_preemptible_gpus: 3 })).body.error.param, 'num_preemptible_gpus');
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });

  test("another project's key sees none of it", async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const other = await createTenant(p.db);
    for (const [method, path] of [
      ['GET', `/v1/compute/clusters/${c.cluster_id}`],
      ['PUT', `/v1/compute/clusters/${c.cluster_id}`],
      ['DELETE', `/v1/compute/clusters/${c.cluster_id}`],
      ['GET', `/v1/compute/clusters/${c.cluster_id}/credentials`],
      ['GET', `/v1/compute/clusters/${c.cluster_id}/instances/x/remediations`],
    ] as const) {
      const res = await call(p.baseUrl, method, path, {
        key: other.key,
        json: method === 'PUT' ? { num_gpus: 16 } : undefined,
      });
      assert.equal(res.status, 404, `${method} ${path}`);
    }
    const list = await call(p.baseUrl, 'GET', '/v1/compute/clusters', { key: other.key });
    assert.deepEqual(list.body.clusters, []);
    const noKey = await call(p.baseUrl, 'GET', '/v1/compute/clusters');
    assert.equal(noKey.status, 401);
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });
});
