/**
 * GPU clusters through the official Python CLI (PyPI `together`, pinned): regions, create (the CLI
 * sends every option it was not given as null), get, list, update, credentials, remediations
 * (create, list, get; approve and reject on the ones health checks propose) and delete.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { deleteAllClusters, NVIDIA_VERSION_ID, REGION, startClusterPlatform } from '../helpers/clusters';
import { call, eventually, type TestPlatform } from '../helpers/platform';
import { together, togetherJson, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;
let cli: PythonClient;

before(async () => {
  // The simulated fleet at test speed (steps of 20 ms, health checks every second).
  p = await startClusterPlatform();
  t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  admin = await createTenant(p.db, { platformAdmin: true });
  cli = { baseUrl: p.baseUrl, key: t.key };
});
after(async () => {
  await deleteAllClusters(p, t.key);
  await p.stop();
});

const [, cuda, driver, os] = /cuda([\d.]+)-drv(\d+)-(.+)$/.exec(NVIDIA_VERSION_ID)!;
const ready = (id: string) =>
  eventually(
    () => togetherJson(cli, 'clusters', 'retrieve', id),
    (c) => c.status === 'Ready',
    60_000,
  );

test('a cluster from the CLI: regions, create, get, list, update, credentials, delete', async () => {
  const regions = await togetherJson(cli, 'clusters', 'list-regions');
  const region = (regions.regions ?? regions).find((r: any) => r.name === REGION);
  assert.ok(region.driver_versions.some((d: any) => d.id === NVIDIA_VERSION_ID));

  const created = await together(
    cli,
    'clusters',
    'create',
    '--name',
    'py-cli',
    '--num-gpus',
    '8',
    '--region',
    REGION,
    '--billing-type',
    'ON_DEMAND',
    '--gpu-type',
    'H100_SXM',
    '--cluster-type',
    'KUBERNETES',
    '--cuda-version',
    cuda,
    '--nvidia-driver-version',
    driver,
    '--os',
    os,
  );
  assert.match(created, /Cluster created successfully/);
  const id = /(cl-[0-9a-f]+)/.exec(created)![1];

  const c = await ready(id);
  assert.equal(c.cluster_name, 'py-cli');
  assert.equal(c.num_gpus, 8);
  assert.match(await together(cli, 'clusters', 'list'), new RegExp(`${id}\\s.*py-cli\\s.*Ready`));

  assert.match(await together(cli, 'clusters', 'update', id, '--num-gpus', '16'), /Cluster updated successfully/);
  const grown = await eventually(
    () => togetherJson(cli, 'clusters', 'retrieve', id),
    (x) => x.status === 'Ready' && x.gpu_worker_nodes.length === 2,
    60_000,
  );
  assert.equal(grown.num_gpus, 16);

  // The kubeconfig the CLI decodes from the cluster object is the one the credentials route serves.
  const kubeconfig = await together(cli, 'clusters', 'get-credentials', id, '--file', '-');
  assert.match(kubeconfig, /kind: Config/);
  const served = await call(p.baseUrl, 'GET', `/v1/compute/clusters/${id}/credentials`, { key: t.key });
  assert.equal(kubeconfig.trim(), String(served.body).trim());

  assert.match(await together(cli, 'clusters', 'delete', id), new RegExp(id));
  await eventually(
    () => togetherJson(cli, 'clusters', 'retrieve', id),
    (x) => !!x.deleted_at,
    60_000,
  );
});

test('remediations from the CLI: create, list, get; approve and reject what health checks propose', async () => {
  const id = (
    await call(p.baseUrl, 'POST', '/v1/compute/clusters', {
      key: t.key,
      json: {
        cluster_name: 'py-rem',
        region: REGION,
        gpu_type: 'H100_SXM',
        num_gpus: 24,
        billing_type: 'ON_DEMAND',
        nvidia_version_id: NVIDIA_VERSION_ID,
      },
    })
  ).body.cluster_id;
  const c = await ready(id);
  const [first, second, third] = c.gpu_worker_nodes;

  const created = await togetherJson(
    cli,
    'clusters',
    'remediations',
    'create',
    '--cluster-id',
    id,
    '--instance-id',
    first.instance_id,
    '--mode',
    'VM_ONLY',
    '--reason',
    'from the Python CLI',
  );
  assert.equal(created.trigger, 'REMEDIATION_TRIGGER_MANUAL');
  const listed = await togetherJson(
    cli,
    'clusters',
    'remediations',
    'list',
    '--cluster-id',
    id,
    '--instance-id',
    first.instance_id,
  );
  assert.deepEqual(
    (listed.remediations ?? listed).map((r: any) => r.id),
    [created.id],
  );
  const got = await eventually(
    () => togetherJson(cli, 'clusters', 'remediations', 'retrieve', created.id),
    (r) => r.state === 'SUCCEEDED' || r.state === 'FAILED',
    60_000,
  );
  assert.equal(got.state, 'SUCCEEDED');

  // Failing health checks on nodes without auto-remediation: proposals wait for a person.
  for (const node of [second, third]) {
    const fault = await call(p.baseUrl, 'POST', '/v1/compute/fleet/faults', {
      key: admin.key,
      json: { cluster_id: id, kind: 'health_check_failure', node_id: node.node_id, count: 100 },
    });
    assert.equal(fault.status, 200, JSON.stringify(fault.body));
  }
  const proposalFor = async (node: any) =>
    (
      await eventually(
        () => togetherJson(cli, 'clusters', 'retrieve', id),
        (x) =>
          x.gpu_worker_nodes.some(
            (n: any) => n.node_id === node.node_id && n.latest_remediation?.state === 'PENDING_APPROVAL',
          ),
        60_000,
      )
    ).gpu_worker_nodes.find((n: any) => n.node_id === node.node_id).latest_remediation;
  const review = (action: string, remediationId: string) =>
    togetherJson(cli, 'clusters', 'remediations', action, remediationId, '--comment', `${action} from the Python CLI`);

  const rejected = await review('reject', (await proposalFor(second)).id);
  assert.equal(rejected.state, 'CANCELLED');
  assert.equal(rejected.review_comment, 'reject from the Python CLI');

  const approved = await review('approve', (await proposalFor(third)).id);
  // Approved: on its way (a reboot cordons and drains the node first), or done already.
  assert.ok(
    ['PENDING', 'QUARANTINING', 'QUARANTINED', 'RUNNING', 'SUCCEEDED'].includes(approved.state),
    approved.state,
  );
  assert.equal(approved.review_comment, 'approve from the Python CLI');
  // The approved reboot runs, and the node is healthy again; the rejected one stays as it was.
  const after = await eventually(
    () => togetherJson(cli, 'clusters', 'retrieve', id),
    (x) => {
      const n = x.gpu_worker_nodes.find((y: any) => y.node_id === third.node_id);
      // The node's status follows the remediation's end by a moment (the cluster records it).
      return n?.latest_remediation?.state === 'SUCCEEDED' && n.status === 'Ready';
    },
    60_000,
  );
  const node = (n: any) => after.gpu_worker_nodes.find((x: any) => x.node_id === n.node_id);
  assert.equal(node(third).status, 'Ready');
  assert.equal(node(second).latest_remediation.state, 'CANCELLED');
  const listed2 = await together(cli, 'clusters', 'remediations', 'list', id);
  for (const r of [created.id, node(second).latest_remediation.id, node(third).latest_remediation.id]) {
    assert.match(listed2, new RegExp(r), 'the whole cluster is listed');
  }
});
