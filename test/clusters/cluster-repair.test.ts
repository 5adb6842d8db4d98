/**
 * Faults injected through the simulator's operator controls, and what a user
 * sees: acceptance and NCCL failures repaired before Ready, a node that never
 * boots, health-check remediations approved, rejected and cancelled, and a
 * manual remediation.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import {
  afterMoreAttempts,
  deleteAllClusters,
  createCluster,
  eventsOf,
  getCluster,
  phasesOf,
  startClusterPlatform,
  waitForCluster,
} from '../helpers/clusters';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;

before(async () => {
  p = await startClusterPlatform();
  t = await createTenant(p.db);
  admin = await createTenant(p.db, { platformAdmin: true });
});
after(async () => {
  await deleteAllClusters(p, t.key);
  await p.stop();
});

async function fault(cluster_id: string, kind: string, extra: Record<string, unknown> = {}) {
  const res = await call(p.baseUrl, 'POST', '/v1/compute/fleet/faults', {
    key: admin.key,
    json: { cluster_id, kind, ...extra },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.simulator, true);
}

const remediations = (c: any, node: any, q = '') =>
  call(p.baseUrl, 'GET', `/v1/compute/clusters/${c.cluster_id}/instances/${node.instance_id}/remediations${q}`, {
    key: t.key,
  });

describe('cluster faults and repair', () => {
  test('an acceptance failure is repaired by replacing the node, then the cluster is Ready', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 16 });
    await fault(c.cluster_id, 'acceptance_failure'); // the first node tested fails
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.deepEqual(phasesOf(ready).slice(-5), [
      'RUNNING_ACCEPTANCE_TESTS',
      'ACCEPTANCE_TESTS_FAILED',
      'RUNNING_ACCEPTANCE_TESTS',
      'RUNNING_NCCL_TESTS',
      'READY',
    ]);
    assert.equal(ready.gpu_worker_nodes.length, 2, 'still two live nodes');
    assert.equal(ready.deleted_gpu_worker_nodes.length, 1, 'the failed one is retired');
    const failed = ready.deleted_gpu_worker_nodes[0];
    const reasons = eventsOf(ready)
      .filter((e: any) => e.node_id === failed.node_id)
      .map((e: any) => e.reason);
    assert.deepEqual(reasons, [
      'AcceptanceTestFailed',
      'RemediationStarted',
      'NodeCordoned',
      'RemediationRunning',
      'RemediationReplaced',
      'RemediationSucceeded',
    ]);
    assert.match(eventsOf(ready, 'AcceptanceTestFailed')[0].message, /dcgm_diag: .*ECC/);
    assert.equal(failed.latest_remediation.state, 'SUCCEEDED');
    assert.equal(failed.latest_remediation.trigger, 'REMEDIATION_TRIGGER_AUTOMATED');
    assert.equal(failed.latest_remediation.mode, 'REMEDIATION_MODE_VM_ONLY');
    // The list reads every cluster's remediations in one query: they stay on this cluster's node.
    const bystander = await createCluster(p, t.key, { num_gpus: 8 });
    await waitForCluster(p, t.key, bystander.cluster_id, (x) => x.gpu_worker_nodes.length === 1);
    const listed = await call(p.baseUrl, 'GET', '/v1/compute/clusters', { key: t.key });
    const inList = (id: string) => listed.body.clusters.find((x: any) => x.cluster_id === id);
    const listedFailed = inList(c.cluster_id).deleted_gpu_worker_nodes.find((n: any) => n.node_id === failed.node_id);
    assert.deepEqual(listedFailed.latest_remediation, failed.latest_remediation);
    const others = [...inList(bystander.cluster_id).gpu_worker_nodes, ...inList(c.cluster_id).gpu_worker_nodes];
    assert.ok(!others.some((n: any) => n.latest_remediation), 'no other node shows a remediation');
  });

  test('an NCCL failure lands in NCCL_TESTS_FAILED, the failing node is replaced and NCCL runs again', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 16 });
    await fault(c.cluster_id, 'nccl_failure');
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.deepEqual(phasesOf(ready).slice(-4), [
      'RUNNING_NCCL_TESTS',
      'NCCL_TESTS_FAILED',
      'RUNNING_NCCL_TESTS',
      'READY',
    ]);
    assert.match(eventsOf(ready, 'NcclTestFailed')[0].message, /InfiniBand link down/);
    assert.equal(ready.deleted_gpu_worker_nodes.length, 1);
  });

  test('repairs are bounded: a cluster whose tests keep failing settles as Degraded', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    await fault(c.cluster_id, 'acceptance_failure', { count: 10 });
    const settled = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Degraded');
    const phases = phasesOf(settled);
    assert.equal(phases.filter((x) => x === 'ACCEPTANCE_TESTS_FAILED').length, 3, 'first failure + 2 repair rounds');
    assert.equal(phases.at(-1), 'DEGRADED');
    assert.equal(settled.first_ready_at, undefined, 'never Ready');
  });

  test('a node that never boots is released and replaced while the data plane comes up', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 16 });
    await fault(c.cluster_id, 'boot_failure');
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.equal(ready.gpu_worker_nodes.length, 2);
    const dead = ready.deleted_gpu_worker_nodes[0];
    assert.equal(dead.phase_transitions.at(-1).phase, 'NODE_PHASE_FAILED');
    assert.equal(eventsOf(ready, 'NodeBootFailed')[0].node_id, dead.node_id);
  });

  test('a failed health check waits for approval, is approved, and the node is rebooted', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const node = ready.gpu_worker_nodes[0];
    await fault(c.cluster_id, 'health_check_failure', { node_id: node.node_id, count: 100 });
    const degraded = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      // The remediation's row is written a moment before the cluster's projection: wait for both.
      (x) => x.gpu_worker_nodes[0].latest_remediation?.state === 'PENDING_APPROVAL' && x.status === 'Degraded',
    );
    assert.equal(degraded.status, 'Degraded');
    assert.equal(degraded.gpu_worker_nodes[0].status, 'Unhealthy');
    const pending = degraded.gpu_worker_nodes[0].latest_remediation;
    assert.equal(pending.trigger, 'REMEDIATION_TRIGGER_AUTOMATED');
    assert.match(pending.reason, /Xid 79/);
    const base = `/v1/compute/clusters/${c.cluster_id}/instances/${node.instance_id}/remediations/${pending.id}`;

    const cancelTwice = await call(p.baseUrl, 'POST', `${base}/approve`, {
      key: t.key,
      json: { comment: 'go', mode: 'REMEDIATION_MODE_HOST_POWER_CYCLE' },
    });
    assert.equal(cancelTwice.status, 400, 'power cycle cannot be an approval override');
    const badKey = await call(p.baseUrl, 'POST', `${base}/approve`, {
      key: t.key,
      json: {},
      headers: { 'idempotency-key': 'has spaces' },
    });
    assert.equal(badKey.status, 400);
    assert.equal(badKey.body.error.param, 'idempotency-key');
    const approve = () =>
      call(p.baseUrl, 'POST', `${base}/approve`, {
        key: t.key,
        json: { comment: 'reboot it' },
        headers: { 'idempotency-key': 'approve-once' },
      });
    const approved = await approve();
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assert.equal(approved.body.state, 'PENDING');
    assert.equal(approved.body.review_comment, 'reboot it');
    assert.match(approved.body.reviewed_by, /^api-key:/);
    // A client retrying after a lost answer gets the first outcome, not a refusal of a second approval.
    const retried = await approve();
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.body.state, 'PENDING');
    assert.equal(retried.body.update_time, approved.body.update_time);
    const again = await call(p.baseUrl, 'POST', `${base}/approve`, { key: t.key, json: {} });
    assert.equal(again.status, 409, 'only PENDING_APPROVAL can be approved');

    const healed = await waitForCluster(
      p,
      t.key,
      c.cluster_id,
      (x) => x.status === 'Ready' && x.gpu_worker_nodes[0].latest_remediation?.state === 'SUCCEEDED',
    );
    const n = healed.gpu_worker_nodes[0];
    assert.equal(n.node_id, node.node_id, 'a reboot keeps the node');
    assert.equal(n.status, 'Ready');
    const phases = n.phase_transitions.map((x: any) => x.phase);
    assert.equal(phases.filter((x: string) => x === 'NODE_PHASE_BOOTING').length, 2, 'booted twice');
    const reasons = eventsOf(healed)
      .filter((e: any) => e.node_id === node.node_id)
      .map((e: any) => e.reason);
    assert.deepEqual(reasons, [
      'HealthCheckFailed',
      'RemediationStarted',
      'NodeCordoned',
      'RemediationRunning',
      'RemediationSucceeded',
    ]);
    const got = await call(p.baseUrl, 'GET', base, { key: t.key });
    assert.equal(got.body.state, 'SUCCEEDED');
    assert.ok(got.body.start_time && got.body.end_time);
    assert.deepEqual(phasesOf(healed).slice(-2), ['DEGRADED', 'READY']);
  });

  test('a rejected remediation is not proposed again while the node keeps failing; cancel and manual create', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const node = ready.gpu_worker_nodes[0];
    await fault(c.cluster_id, 'health_check_failure', { node_id: node.node_id, count: 100 });
    const pending = (
      await waitForCluster(
        p,
        t.key,
        c.cluster_id,
        (x) => x.gpu_worker_nodes[0].latest_remediation?.state === 'PENDING_APPROVAL',
      )
    ).gpu_worker_nodes[0].latest_remediation;
    const base = `/v1/compute/clusters/${c.cluster_id}/instances/${node.instance_id}/remediations`;
    const rej = await call(p.baseUrl, 'POST', `${base}/${pending.id}/reject`, {
      key: t.key,
      json: { comment: 'not now' },
    });
    assert.equal(rej.status, 200);
    assert.equal(rej.body.state, 'CANCELLED');
    assert.equal(rej.body.review_comment, 'not now');
    await afterMoreAttempts(p, c.cluster_id, 'runHealthCheck', 2); // two more failing health checks
    const list = await remediations(c, node);
    assert.equal(list.body.remediations.length, 1, 'no new proposal after a rejection');
    assert.equal((await getCluster(p, t.key, c.cluster_id)).status, 'Degraded');

    // A manual remediation goes straight to PENDING and runs; a second one on the same node is refused.
    const manual = await call(p.baseUrl, 'POST', `${base}?remediation_id=manual-1`, {
      key: t.key,
      json: { mode: 'REMEDIATION_MODE_VM_ONLY', reason: 'replace it' },
    });
    assert.equal(manual.status, 200, JSON.stringify(manual.body));
    assert.equal(manual.body.trigger, 'REMEDIATION_TRIGGER_MANUAL');
    assert.equal(manual.body.id, 'manual-1');
    const same = await call(p.baseUrl, 'POST', `${base}?remediation_id=manual-1`, {
      key: t.key,
      json: { mode: 'REMEDIATION_MODE_VM_ONLY' },
    });
    assert.equal(same.status, 200, 'the same client id is idempotent');
    assert.equal(same.body.id, 'manual-1');
    const done = await eventually(
      () => call(p.baseUrl, 'GET', `${base}/manual-1`, { key: t.key }),
      (r) => r.body.state === 'SUCCEEDED' || r.body.state === 'FAILED',
    );
    assert.equal(done.body.state, 'SUCCEEDED', JSON.stringify(done.body));
    const cancelDone = await call(p.baseUrl, 'POST', `${base}/manual-1/cancel`, { key: t.key });
    assert.equal(cancelDone.status, 409, 'a finished remediation cannot be cancelled');
    const fixed = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.equal(fixed.deleted_gpu_worker_nodes[0].node_id, node.node_id, 'replaced by a new node');
    assert.notEqual(fixed.gpu_worker_nodes[0].node_id, node.node_id);
    assert.equal(fixed.deleted_gpu_worker_nodes[0].latest_remediation.id, 'manual-1');
    const filtered = await remediations(c, node, '?state=CANCELLED');
    assert.ok(filtered.body.remediations.every((r: any) => r.state === 'CANCELLED'));
    assert.equal(filtered.body.has_next, false);
  });

  test('a remediation waiting for approval can be cancelled', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    const ready = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const node = ready.gpu_worker_nodes[0];
    await fault(c.cluster_id, 'health_check_failure', { node_id: node.node_id, count: 1 });
    const r = await eventually(
      () => remediations(c, node),
      (res) => res.body.remediations?.[0]?.state === 'PENDING_APPROVAL',
    );
    const id = r.body.remediations[0].id;
    const cancelled = await call(
      p.baseUrl,
      'POST',
      `/v1/compute/clusters/${c.cluster_id}/instances/${node.instance_id}/remediations/${id}/cancel`,
      { key: t.key },
    );
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.state, 'CANCELLED');
    // The fault was used once: the next check passes and the node recovers on its own.
    const back = await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    assert.ok(eventsOf(back, 'HealthCheckRecovered').length >= 1);
  });
});
