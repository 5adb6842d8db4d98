import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { revokeApiKey } from '../../db/accounts';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

function assertErrorShape(body: any, status: number, res: { status: number }) {
  assert.equal(res.status, status);
  assert.equal(typeof body.error.message, 'string');
  assert.ok(body.error.message.length > 0);
  assert.equal(typeof body.error.type, 'string');
  assert.ok('param' in body.error && 'code' in body.error, 'error has param and code');
}

describe('authentication and errors', () => {
  let p: TestPlatform;
  let admin: Tenant;
  let member: Tenant;

  before(async () => {
    p = await startTestPlatform();
    admin = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin' });
    member = await createTenant(p.db);
  });
  after(() => p.stop());

  test('a request without a key is 401 in the spec error shape', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/whoami');
    assertErrorShape(res.body, 401, res);
    assert.equal(res.body.error.type, 'authentication_error');
    assert.match(res.body.error.message, /Authorization: Bearer/);
  });

  test('an unknown key, a malformed header and a revoked key are 401', async () => {
    const unknown = await call(p.baseUrl, 'GET', '/v1/whoami', { key: 'gantry_not-a-real-key' });
    assertErrorShape(unknown.body, 401, unknown);
    assert.equal(unknown.body.error.message, 'Invalid API key.');

    const basic = await call(p.baseUrl, 'GET', '/v1/whoami', { headers: { authorization: `Basic ${member.key}` } });
    assertErrorShape(basic.body, 401, basic);
    assert.match(basic.body.error.message, /Malformed Authorization header/);

    // Revoked through the API: refused from the very next request (the revoking process drops its cache).
    const doomed = await createTenant(p.db);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: doomed.key })).status, 200);
    assert.equal((await call(p.baseUrl, 'DELETE', `/v1/api-keys/${doomed.keyId}`, { key: doomed.key })).status, 200);
    const revoked = await call(p.baseUrl, 'GET', '/v1/whoami', { key: doomed.key });
    assertErrorShape(revoked.body, 401, revoked);
  });

  test('a key revoked by another process stops working when its notification arrives', async () => {
    const doomed = await createTenant(p.db);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: doomed.key })).status, 200);
    await revokeApiKey(p.db, doomed.keyId); // straight in the database, as another API process would
    const revoked = await eventually(
      () => call(p.baseUrl, 'GET', '/v1/whoami', { key: doomed.key }),
      (r) => r.status !== 200,
      3_000,
    );
    assertErrorShape(revoked.body, 401, revoked);
  });

  test('the v2 router and unknown routes also authenticate first', async () => {
    assert.equal((await call(p.baseUrl, 'GET', '/v2/projects/x/endpoints')).status, 401);
    const res = await call(p.baseUrl, 'GET', '/v1/no-such-thing', { key: member.key });
    assertErrorShape(res.body, 404, res);
    assert.equal(res.body.error.code, 'route_not_found');
    assert.match(res.body.error.message, /GET \/v1\/no-such-thing/);
  });

  test('GET /v1/compute/clusters/regions is a 400, as the spec says', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/compute/clusters/regions', { key: member.key });
    assertErrorShape(res.body, 400, res);
    assert.match(res.body.error.message, /GET \/v1\/compute\/regions/);
  });

  test('malformed JSON is a 400 that says so', async () => {
    const res = await call(p.baseUrl, 'POST', '/v1/system/self-checks', {
      key: admin.key,
      body: '{"gpu_types": [',
      headers: { 'content-type': 'application/json' },
    });
    assertErrorShape(res.body, 400, res);
    assert.equal(res.body.error.code, 'invalid_json');
    assert.match(res.body.error.message, /Malformed JSON body/);
  });

  test('a body that is not JSON is refused by content type', async () => {
    const res = await call(p.baseUrl, 'POST', '/v1/system/self-checks', {
      key: admin.key,
      body: 'gpu_types=H100_SXM',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    assertErrorShape(res.body, 400, res);
    assert.equal(res.body.error.code, 'unsupported_content_type');
    assert.match(res.body.error.message, /application\/json/);
  });

  test('an oversized body is a 413', async () => {
    const big = JSON.stringify({ gpu_types: [], padding: 'x'.repeat(2 * 1024 * 1024) });
    const res = await call(p.baseUrl, 'POST', '/v1/system/self-checks', {
      key: admin.key,
      body: big,
      headers: { 'content-type': 'application/json' },
    });
    assertErrorShape(res.body, 413, res);
    assert.equal(res.body.error.type, 'request_too_large');
  });

  test('validation errors name the offending field in param', async () => {
    const badEnum = await call(p.baseUrl, 'POST', '/v1/system/self-checks', {
      key: admin.key,
      json: { gpu_types: ['H100_SXM', 'TPU_V5'] },
    });
    assertErrorShape(badEnum.body, 400, badEnum);
    assert.equal(badEnum.body.error.param, 'gpu_types.1');
    assert.match(badEnum.body.error.message, /'gpu_types\.1'/);

    const unknownField = await call(p.baseUrl, 'POST', '/v1/system/self-checks', {
      key: admin.key,
      json: { gpu_types: ['H100_SXM'], colour: 'blue' },
    });
    assertErrorShape(unknownField.body, 400, unknownField);
    assert.equal(unknownField.body.error.param, 'colour');
    assert.equal(unknownField.body.error.message, "Unknown field 'colour'.");

    const unknownQuery = await call(p.baseUrl, 'GET', '/v1/system/self-checks?limit=5&sort=asc', { key: admin.key });
    assertErrorShape(unknownQuery.body, 400, unknownQuery);
    assert.equal(unknownQuery.body.error.param, 'sort');

    const badQuery = await call(p.baseUrl, 'GET', '/v1/system/self-checks?limit=0', { key: admin.key });
    assertErrorShape(badQuery.body, 400, badQuery);
    assert.equal(badQuery.body.error.param, 'limit');

    const notObject = await call(p.baseUrl, 'POST', '/v1/system/self-checks', { key: admin.key, json: [1, 2] });
    assertErrorShape(notObject.body, 400, notObject);
    assert.match(notObject.body.error.message, /JSON object/);
  });

  test('operator routes are 403 for a key whose user does not operate the installation', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/system/status', { key: member.key });
    assertErrorShape(res.body, 403, res);
    assert.equal(res.body.error.code, 'platform_admin_required');
  });

  test('after all of that the server still serves, and request ids are echoed', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/whoami', {
      key: member.key,
      headers: { 'x-request-id': 'trace-123' },
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-request-id'), 'trace-123');
    const generated = await call(p.baseUrl, 'GET', '/v1/whoami', {
      key: member.key,
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    assert.match(generated.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });

  test('no API key ever reaches the logs', async () => {
    await call(p.baseUrl, 'GET', '/v1/whoami?token=abc', { key: member.key });
    const logged = p.logs.text();
    assert.ok(logged.includes('/v1/whoami'), 'requests are logged');
    for (const secret of [member.key, admin.key]) {
      assert.ok(!logged.includes(secret), 'a key appeared in the log');
      assert.ok(!logged.includes(secret.slice(7, 30)), 'part of a key appeared in the log');
    }
    assert.ok(!logged.includes('token=abc'), 'query strings are not logged');
  });

  test("a request's log line names its id, method, path, status, project and key, and nothing of its headers", async () => {
    await call(p.baseUrl, 'GET', '/v1/whoami', { key: member.key, headers: { 'x-request-id': 'log-shape' } });
    const line = await eventually(
      async () => p.logs.lines.map((l) => JSON.parse(l)).find((l) => l.req?.id === 'log-shape' && l.res),
      (l) => l !== undefined,
    );
    assert.deepEqual(line.req, { id: 'log-shape', method: 'GET', path: '/v1/whoami' });
    assert.deepEqual(line.res, { statusCode: 200 });
    assert.equal(line.msg, 'request completed');
    assert.equal(typeof line.responseTime, 'number');
    assert.equal(line.project, member.projectId);
    assert.match(String(line.apiKeyId), /\S/);
  });
});
