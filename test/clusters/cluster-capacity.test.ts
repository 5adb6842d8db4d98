/**
 * Capacity over a cluster's life: preemptible GPUs fulfilled as capacity
 * allows, a preemption drain on its grace timer, autoscaling with the
 * workload, manual resize, a scheduled start and the reservation's end,
 * shared volumes, SLURM, and continue-as-new without losing state.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { searchedAsItEnded } from '../helpers/operator-view';
import { call, eventually, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import {
  afterMoreAttempts,
  deleteAllClusters,
  createCluster,
  eventsOf,
  phasesOf,
  REGION,
  startClusterPlatform,
  waitForCluster,
} from '../helpers/clusters';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;

before(async () => {
  p = await startClusterPlatform({ GANTRY_CLUSTER_ROUNDS_PER_RUN: '4' });
  t = await createTenant(p.db);
  admin = await createTenant(p.db, { platformAdmin: true });
});
after(async () => {
  await deleteAllClusters(p, t.key);
  await p.stop();
});

const fleet = (method: string, path: string, json: unknown) =>
  call(p.baseUrl, method, `/v1/compute/fleet${path}`, { key: admin.key, json });
const put = (id: string, json: unknown) => call(p.baseUrl, 'PUT', `/v1/compute/clusters/${id}`, { key: t.key, json });

describe('cluster capacity', () => {
  test('preemptible GPUs: held-back capacity, then fulfilled; a preemption drains for its grace period', async () => {
    // A region-wide hold first: the cluster asks for 16 preemptible GPUs but gets 8.
    assert.equal(
      (await fleet('PUT', '/capacity', { region: REGION, gpu_type: 'H100_SXM', preemptible_nodes: 1 })).status,
      200,
    );
    const c = await createCluster(p, t.key, { gpu_type: 'H100_SXM', num_gpus: 8, num_preemptible_gpus: 16 });
    assert.equal(c.desired_preemptible_gpus, 16);
    const partial = await waitForCluster(p, t.key, c.cluster_id, (x) => x.allocated_preemptible_gpus === 8);
    assert.equal(partial.desired_preemptible_gpus, 16);
    assert.equal(partial.num_gpus, 8, 'preemptible GPUs are not part of num_gpus');
    await fleet('PUT', '/capacity', { region: REGION, gpu_type: 'H100_SXM', preemptible_nodes: null });
    const full = await waitForCluster(p, t.key, c.cluster_id, (x) => x.allocated_preemptible_gpus === 16);
    assert.equal(full.gpu_worker_nodes.length, 3);

    // The fleet reclaims one preemptible node.
    const victim = full.gpu_worker_nodes.find((n: any) => n.node_id !== full.gpu_worker_nodes[0].node_id);
    const regular = full.gpu_worker_nodes[0];
    const notRegular = await fleet('POST', `/clusters/${c.cluster_id}/preemption-notices`, {
      node_id: regular.node_id,
    });
    assert.equal(notRegular.status, 400, 'only preemptible nodes are reclaimed');
    const sent = await fleet('POST', `/clusters/${c.cluster_id}/preemption-notices`, { node_id: victim.node_id });
    assert.equal(sent.status, 200);
    const draining = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => eventsOf(x, 'ServicePreemptionNotified').length > 0,
    );
    const drainingNode = draining.gpu_worker_nodes.find((n: any) => n.node_id === victim.node_id);
    assert.equal(drainingNode.marked_for_deletion, true);
    assert.equal(drainingNode.status, 'Cordoned');
    const gone = await waitForCluster(p, t.key, c.cluster_id, (x) => eventsOf(x, 'ServicePreempted').length > 0);
    const notified = Date.parse(eventsOf(gone, 'ServicePreemptionNotified')[0].timestamp);
    const preempted = Date.parse(eventsOf(gone, 'ServicePreempted')[0].timestamp);
    assert.ok(preempted - notified >= 2000, `grace honoured: ${preempted - notified} ms`);
    assert.ok(gone.deleted_gpu_worker_nodes.some((n: any) => n.node_id === victim.node_id && n.deleted_at));
    assert.ok(!gone.gpu_worker_nodes.some((n: any) => n.node_id === victim.node_id), 'not counted as live');
    // Capacity is there, so a replacement is asked for and joins.
    const replaced = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => x.allocated_preemptible_gpus === 16 && x.gpu_worker_nodes.length === 3,
    );
    assert.ok(eventsOf(replaced, 'ServiceScaledUp').length >= 3);
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    await waitForCluster(p, t.key, c.cluster_id, (x) => !!x.deleted_at);
  });

  test('autoscaling follows the workload between num_gpus and auto_scale_max_gpus', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8, auto_scale: true, auto_scale_max_gpus: 24 });
    await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    await fleet('PUT', `/clusters/${c.cluster_id}/workload`, { pending_gpu_requests: 12, idle_gpus: 0 });
    const up = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => x.gpu_worker_nodes.length === 3 && x.status === 'Ready',
    );
    assert.equal(eventsOf(up, 'ServiceScaledUp').length, 2, 'two nodes for 12 pending GPUs');
    assert.ok(phasesOf(up).includes('WAITING_FOR_AUTO_SCALER'));
    assert.equal(up.num_gpus, 8, 'num_gpus stays the floor');
    await fleet('PUT', `/clusters/${c.cluster_id}/workload`, { pending_gpu_requests: 40, idle_gpus: 0 });
    await afterMoreAttempts(p, c.cluster_id, 'observeWorkload', 2); // the autoscaler saw the demand twice
    const capped = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.equal(capped.gpu_worker_nodes.length, 3, 'never above auto_scale_max_gpus');
    await fleet('PUT', `/clusters/${c.cluster_id}/workload`, { pending_gpu_requests: 0, idle_gpus: 24 });
    const down = await waitForCluster(p, t.key, c.cluster_id, (x) => x.gpu_worker_nodes.length === 1);
    assert.equal(eventsOf(down, 'ServiceScaledDown').length, 2);
    assert.equal(down.deleted_gpu_worker_nodes.length, 2);
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });

  test('a manual resize goes through the same path, up and down', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const res = await put(c.cluster_id, { num_gpus: 24 });
    assert.equal(res.status, 200);
    assert.equal(res.body.num_gpus, 24);
    const up = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => x.gpu_worker_nodes.length === 3 && x.status === 'Ready',
    );
    assert.equal(eventsOf(up, 'ServiceScaledUp').length, 2);
    assert.ok(phasesOf(up).includes('WAITING_FOR_DATA_PLANE_NODES'));
    await put(c.cluster_id, { num_gpus: 16 });
    const down = await waitForCluster(p, t.key, c.cluster_id, (x) => x.gpu_worker_nodes.length === 2);
    assert.equal(eventsOf(down, 'ServiceScaledDown').length, 1);
    assert.equal(down.num_gpus, 16);
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });

  test('SCHEDULED_CAPACITY waits for its start on a timer and ends itself at reservation_end_time', async () => {
    const start = new Date(Date.now() + 3000).toISOString();
    const end = new Date(Date.now() + 9000).toISOString();
    const c = await createCluster(p, t.key, {
      billing_type: 'SCHEDULED_CAPACITY',
      num_gpus: 8,
      reservation_start_time: start,
      reservation_end_time: end,
    });
    const scheduled = await waitForCluster(p, t.key, c.cluster_id, (x) => phasesOf(x).includes('SCHEDULED'));
    assert.deepEqual(phasesOf(scheduled), ['QUEUED', 'SCHEDULED']);
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const cpAt = ready.phase_transitions.find(
      (x: any) => x.phase === 'CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES',
    ).transition_time;
    assert.ok(Date.parse(cpAt) >= Date.parse(start), 'provisioning began at the reservation start');
    const ended = await waitForCluster(p, t.key, c.cluster_id, (x) => !!x.deleted_at, 20_000);
    assert.ok(Date.parse(ended.deleted_at) >= Date.parse(end));
    assert.match(eventsOf(ended, 'NodeReleased')[0].message, /scheduled capacity window ended/);
  });

  test('shared volumes: created inline or in advance, bound while the cluster lives, released with it', async () => {
    const made = await call(p.baseUrl, 'POST', '/v1/compute/clusters/storage/volumes', {
      key: t.key,
      json: { region: REGION, size_tib: 2, volume_name: 'datasets' },
    });
    assert.equal(made.status, 200);
    assert.equal(made.body.status, 'provisioning');
    const vol = made.body.volume_id;
    await eventually(
      () => call(p.baseUrl, 'GET', `/v1/compute/clusters/storage/volumes/${vol}`, { key: t.key }),
      (r) => r.body.status === 'available',
    );
    assert.deepEqual(
      await searchedAsItEnded(p.temporal, `volume/${vol}`, { type: 'storageVolume', label: 'available-final-status' }),
      { status: 'available', phase: 'active' },
      'operators find it by how it ended',
    );
    const shrink = await call(p.baseUrl, 'PUT', '/v1/compute/clusters/storage/volumes', {
      key: t.key,
      json: { volume_id: vol, size_tib: 1 },
    });
    assert.equal(shrink.body.error.param, 'size_tib');
    const grow = await call(p.baseUrl, 'PUT', '/v1/compute/clusters/storage/volumes', {
      key: t.key,
      json: { volume_id: vol, size_tib: 4 },
    });
    assert.equal(grow.body.size_tib, 4);

    const withExisting = await createCluster(p, t.key, { num_gpus: 8, volume_id: vol });
    const withInline = await createCluster(p, t.key, {
      num_gpus: 8,
      shared_volume: { region: REGION, size_tib: 1, volume_name: 'scratch' },
    });
    for (const c of [withExisting, withInline]) {
      const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
      assert.ok(phasesOf(ready).includes('WAITING_FOR_SHARED_VOLUME'));
      assert.equal(ready.volumes.length, 1);
      assert.equal(ready.volumes[0].status, 'bound');
    }
    // The list reads every cluster's volumes in one query: each cluster still shows its own.
    const listed = await call(p.baseUrl, 'GET', '/v1/compute/clusters', { key: t.key });
    const volumesIn = (id: string) =>
      listed.body.clusters.find((x: any) => x.cluster_id === id).volumes.map((v: any) => v.volume_name);
    assert.deepEqual(volumesIn(withExisting.cluster_id), ['datasets']);
    assert.deepEqual(volumesIn(withInline.cluster_id), ['scratch']);
    const busy = await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/storage/volumes/${vol}`, { key: t.key });
    assert.equal(busy.status, 409, 'a bound volume cannot be deleted');
    const inlineVol = (await waitForCluster(p, t.key, withInline.cluster_id, () => true)).volumes[0].volume_id;
    for (const c of [withExisting, withInline]) {
      await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
      await waitForCluster(p, t.key, c.cluster_id, (x) => !!x.deleted_at);
    }
    const kept = await call(p.baseUrl, 'GET', `/v1/compute/clusters/storage/volumes/${vol}`, { key: t.key });
    assert.equal(kept.body.status, 'available', 'an existing volume outlives the cluster');
    const inline = await call(p.baseUrl, 'GET', `/v1/compute/clusters/storage/volumes/${inlineVol}`, { key: t.key });
    assert.equal(inline.status, 404, 'an inline volume goes with its cluster');
    const other = await createTenant(p.db);
    assert.equal(
      (await call(p.baseUrl, 'GET', `/v1/compute/clusters/storage/volumes/${vol}`, { key: other.key })).status,
      404,
    );
    assert.equal(
      (await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/storage/volumes/${vol}`, { key: t.key })).status,
      200,
    );
  });

  test('a SLURM cluster has Slurm worker names and no kubeconfig', async () => {
    const c = await createCluster(p, t.key, { cluster_type: 'SLURM', slurm_shm_size_gib: 64, num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.match(ready.gpu_worker_nodes[0].slurm_worker_hostname, /^slurm-/);
    assert.equal(ready.kube_config, '');
    const creds = await call(p.baseUrl, 'GET', `/v1/compute/clusters/${c.cluster_id}/credentials`, { key: t.key });
    assert.equal(creds.status, 409);
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
  });

  test('a long-lived cluster continues as new and keeps its state and its pending work', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const handle = p.temporal.workflow.getHandle(`cluster/${c.cluster_id}`);
    const firstRun = (await handle.describe()).runId;
    await eventually(
      () => handle.describe(),
      (d) => d.runId !== firstRun,
      30_000,
    );
    // The new run still knows the nodes and still takes updates.
    const res = await put(c.cluster_id, { num_gpus: 16 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const grown = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => x.gpu_worker_nodes.length === 2 && x.status === 'Ready',
    );
    assert.equal(grown.gpu_worker_nodes[0].node_id, ready.gpu_worker_nodes[0].node_id);
    assert.deepEqual(phasesOf(grown).slice(0, phasesOf(ready).length), phasesOf(ready));
    await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${c.cluster_id}`, { key: t.key });
    await waitForCluster(p, t.key, c.cluster_id, (x) => !!x.deleted_at);
  });
});
