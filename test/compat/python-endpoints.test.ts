/**
 * Models and dedicated endpoints through the official Python CLI (PyPI `together`, pinned): the
 * public catalog, registering a model; deploy a catalog model by its deployment profile, list, get, update, events, a canary rollout to a second
 * deployment, a rollout canceled with revert, and removal of deployments and the endpoint.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { together, togetherJson, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';

const BASE = 'gantry/reference-byte-tiny';

let p: TestPlatform;
let t: Tenant;
let cli: PythonClient;
let endpointId: string;
let blue: string;
let green: string;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  cli = { baseUrl: p.baseUrl, key: t.key };
});
after(() => p.stop());

/** The CLI asks which project a change is for: named here as a user of several projects would. */
const inProject = (...args: string[]) => ['--project', t.projectId, ...args];
const endpoint = () =>
  call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/${endpointId}`, { key: t.key }).then((r) => r.body);
const readyDeployments = (n: number) =>
  eventually(
    endpoint,
    (e) => e.deployments.filter((d: any) => d.state === 'DEPLOYMENT_STATE_READY').length === n,
    60_000,
  );

test('models: the public catalog with its profiles; create registers a model; list and get show it', async () => {
  const catalog = await togetherJson(cli, 'models', 'public');
  const base = (catalog.data ?? catalog).find((m: any) => m.name === BASE);
  assert.ok(base, JSON.stringify(catalog).slice(0, 500));
  assert.ok(base.deploymentProfiles.length >= 1, 'deployable: it has a deployment profile');

  const created = await togetherJson(
    cli,
    ...inProject('models', 'create', '--name', 'py-registered', '--base-model', BASE),
  );
  assert.match(created.id, /^ml_/);
  assert.equal(created.name, `${t.projectSlug}/py-registered`);
  const listed = await togetherJson(cli, ...inProject('models', 'list'));
  assert.ok((listed.data ?? listed).some((m: any) => m.id === created.id));
  const got = await togetherJson(cli, ...inProject('models', 'get', '--id', created.id));
  assert.equal(got.id, created.id);
  assert.match(await together(cli, ...inProject('models', 'configs', BASE)), /cr_reference-byte-tiny-fp32/);
});

test('deploy a catalog model: the CLI picks its deployment profile; ls and get show it serving', async () => {
  const out = await together(
    cli,
    ...inProject('endpoints', 'deploy', BASE, '--endpoint', 'py-ep', '--deployment-name', 'blue'),
  );
  assert.match(out, /py-ep/);
  const listed = await togetherJson(cli, ...inProject('endpoints', 'ls'));
  const mine = (listed.data ?? listed).find((e: any) => e.name === 'py-ep');
  assert.ok(mine, JSON.stringify(listed));
  endpointId = mine.id;
  assert.match(endpointId, /^ep_/);

  const e = await readyDeployments(1);
  blue = e.deployments[0].id;
  assert.match(blue, /^dep_/);
  assert.equal(e.deployments[0].model, BASE);

  const shown = await together(cli, ...inProject('endpoints', 'get', '--id', 'py-ep'));
  assert.match(shown, new RegExp(endpointId));
  assert.match(shown, /Name: blue/);
  assert.match(shown, /Status: Ready/);
  // And it answers through the gateway, as <project slug>/<endpoint name>.
  const answer = await call(p.gatewayUrl, 'POST', '/v1/completions', {
    key: t.key,
    json: { model: `${t.projectSlug}/py-ep`, prompt: 'hi', max_tokens: 2 },
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
});

test('update: new replica bounds, the rest of autoscaling kept; events newest first', async () => {
  await together(cli, ...inProject('endpoints', 'update', '--id', blue, '--max-replicas', '2'));
  const d = (await endpoint()).deployments.find((x: any) => x.id === blue);
  assert.equal(d.autoscaling.maxReplicas, 2);
  assert.equal(d.autoscaling.minReplicas, 1, 'minReplicas kept');

  const events = await togetherJson(cli, ...inProject('endpoints', 'events', 'py-ep'));
  const list = events.data ?? events;
  const types = list.map((x: any) => x.type);
  for (const type of ['endpoint.created', 'deployment.created', 'deployment.ready'])
    assert.ok(types.includes(type), `${type} in ${types.join(', ')}`);
  const times = list.map((x: any) => Date.parse(x.createdAt));
  assert.deepEqual(
    times,
    [...times].sort((a, b) => b - a),
    'newest first',
  );
});

test('a canary rollout to a second deployment moves all traffic to it', async () => {
  await together(cli, ...inProject('endpoints', 'deploy', BASE, '--endpoint', 'py-ep', '--deployment-name', 'green'));
  const e = await readyDeployments(2);
  green = e.deployments.find((d: any) => d.name === 'green').id;

  const out = await together(
    cli,
    ...inProject('endpoints', 'rollout', '--id', green, '--canary', '--steps', '50,100', '--interval', '2s'),
  );
  assert.match(out, /rol_/);
  const done = await eventually(endpoint, (x) => !x.activeRolloutId, 60_000);
  assert.deepEqual(done.trafficSplit, [{ deploymentId: green, weight: 100 }]);
});

test('a rollout canceled with revert puts the traffic back on the source', async () => {
  // Back to blue, slowly, then cancel with revert: green keeps everything.
  await together(cli, ...inProject('endpoints', 'update', '--id', blue, '--min-replicas', '1', '--max-replicas', '1'));
  await readyDeployments(2);
  const started = await together(
    cli,
    ...inProject(
      'endpoints',
      'rollout',
      '--id',
      blue,
      '--source',
      green,
      '--canary',
      '--steps',
      '25,100',
      '--interval',
      '10m',
    ),
  );
  const rolloutId = /(rol_[0-9a-f-]+)/.exec(started)![1];
  await eventually(
    endpoint,
    (x) => x.trafficSplit.some((s: any) => s.deploymentId === blue && s.weight === 25),
    60_000,
  );
  await together(cli, ...inProject('endpoints', 'rollout', '--id', rolloutId, '--cancel', 'revert'));
  const reverted = await eventually(endpoint, (x) => !x.activeRolloutId, 30_000);
  const weight = (id: string) => reverted.trafficSplit.find((s: any) => s.deploymentId === id)?.weight ?? 0;
  assert.equal(weight(blue), 0);
  assert.equal(weight(green), 100);
});

test('rm: a deployment, then the endpoint', async () => {
  assert.match(
    await together(cli, ...inProject('endpoints', 'rm', '--id', blue)),
    new RegExp(`Deleted deployment ${blue}`),
  );
  assert.match(
    await together(cli, ...inProject('endpoints', 'rm', '--id', endpointId, '--force')),
    new RegExp(`Deleted endpoint ${endpointId}`),
  );
  const gone = await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/${endpointId}`, { key: t.key });
  assert.equal(gone.status, 404);
});
