/**
 * A project's deployments stay within its replica quota (GANTRY_PROJECT_MAX_REPLICAS): the sum
 * of their max_replicas, container and endpoint deployments alike. Deploying, raising a ceiling
 * (an update, or an endpoint's autoscaling) past it is a 403 naming the field; lowering
 * one never is; other projects have quotas of their own. (No container host runs here: the quota
 * is the API's, before any replica starts.)
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const QUOTA = 4;
let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ containers: false, env: { GANTRY_PROJECT_MAX_REPLICAS: String(QUOTA) } });
  t = await createTenant(p.db);
});
after(() => p.stop());

const deploy = (name: string, max: number, tenant = t) =>
  call(p.baseUrl, 'POST', '/v1/deployments', {
    key: tenant.key,
    json: { name, image: 'gantry-examples/http-replica', gpu_type: 'h100-80gb', min_replicas: 0, max_replicas: max },
  });
const update = (name: string, json: Record<string, unknown>, tenant = t) =>
  call(p.baseUrl, 'PATCH', `/v1/deployments/${name}`, { key: tenant.key, json });

function refused(res: { status: number; body: any }, param: string) {
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.equal(res.body.error.code, 'replica_quota_exceeded');
  assert.equal(res.body.error.param, param);
  assert.match(res.body.error.message, new RegExp(`its quota is ${QUOTA}`));
}

test('deployments, updates and endpoint deployments stop at the project replica quota', async () => {
  assert.equal((await deploy('a', 2)).status, 200);
  refused(await deploy('b', 3), 'max_replicas');
  assert.equal((await deploy('b', 1)).status, 200);

  refused(await update('a', { max_replicas: 4 }), 'max_replicas');
  assert.equal((await update('a', { max_replicas: 3 })).status, 200, 'up to the quota');
  assert.equal((await update('a', { max_replicas: 1 })).status, 200, 'lowering is always allowed');
  assert.equal((await update('a', { max_replicas: 3 })).status, 200, 'and up again');
  refused(await deploy('c', 1), 'max_replicas');

  // Endpoint deployments run replicas too, and count in the same quota.
  const v2 = (method: string, url: string, json?: unknown) =>
    call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });
  const endpoint = await v2('POST', '/endpoints', { name: 'chat' });
  assert.equal(endpoint.status, 200, JSON.stringify(endpoint.body));
  const served = await v2('POST', `/endpoints/${endpoint.body.id}/deployments`, {
    name: 'base',
    modelId: 'gantry/reference-byte-tiny',
    autoscaling: { minReplicas: 0, maxReplicas: 1 },
  });
  refused(served, 'autoscaling.maxReplicas');
  const { rows } = await p.db.query('SELECT count(*)::int AS n FROM deployments WHERE project_id = $1', [t.projectId]);
  assert.equal(rows[0].n, 2, 'a refused deployment leaves no row');

  // Another project has a quota of its own.
  const other = await createTenant(p.db);
  assert.equal((await deploy('a', QUOTA, other)).status, 200);
});

test('a rollback to a revision with a higher ceiling is held to the quota too', async () => {
  const u = await createTenant(p.db);
  assert.equal((await deploy('r', 3, u)).status, 200);
  const revisions = (name: string) =>
    call(p.baseUrl, 'GET', `/v1/deployments/${name}/revisions`, { key: u.key }).then((r) => r.body.data as unknown[]);
  // Revision 1 (max_replicas 3) is kept once its workflow has projected it.
  await eventually(
    () => revisions('r'),
    (data) => data.length === 1,
  );
  const changed = await update('r', { image: 'gantry-examples/http-replica:2', max_replicas: 1 }, u);
  assert.equal(changed.status, 200, JSON.stringify(changed.body));
  assert.equal((await deploy('s', 3, u)).status, 200, '1 + 3: the quota, not past it');
  await eventually(
    () => revisions('r'),
    (data) => data.length === 2,
  );

  const rollback = () =>
    call(p.baseUrl, 'POST', '/v1/deployments/r/rollback', { key: u.key, json: { revision_identifier: '1' } });
  refused(await rollback(), 'max_replicas');
  assert.equal((await update('s', { max_replicas: 1 }, u)).status, 200);
  const back = await rollback();
  assert.equal(back.status, 200, JSON.stringify(back.body));
  assert.equal(back.body.max_replicas, 3);
});
