/**
 * The installation's admin key (the key of a platform administrator, as the first start makes it:
 * db/bootstrap.ts), as a tenant would try to get past it:
 *
 * - every route for operators (enumerated from the routes the API registered, so a new one is
 *   covered when it is added) refuses an ordinary project key, whatever the key's roles in its
 *   project and organization, with the request an attacker would send (their own organization's
 *   beta switched on, a fault injected), and the change does not happen;
 * - a key that is nearly the admin key (one character off, cut short, in another header, in the
 *   query, under another scheme, revoked) is refused on each of them;
 * - the admin key never reaches a log line: not the API's (with every request above, at info),
 *   nor the first start's output (scripts/bootstrap.ts, run as an installation runs it).
 *
 * Not tested: that the key is compared in constant time. It is never compared: it is looked up by
 * its SHA-256 (db/accounts.ts hashApiKey; db/principal-cache.ts keys its entries the same way), so
 * the time a lookup takes says nothing about how much of a guess was right.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createHash } from 'node:crypto';
import { findPrincipalByApiKey, revokeApiKey } from '../../db/accounts';
import { createPool } from '../../db/pool';
import { createThrowawayDatabase } from '../../scripts/lib/ephemeral-services';
import type { RegisteredRoute } from '../../api/route';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let admin: Tenant;
/** Ordinary project keys, of each role a tenant can hold. */
let attackers: Record<string, Tenant>;

before(async () => {
  p = await startTestPlatform({ containers: false });
  // As db/bootstrap.ts makes it: a platform administrator, Admin of its organization and project.
  admin = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin', organizationRole: 'Admin' });
  attackers = {
    'a project Editor': await createTenant(p.db),
    'a project Admin': await createTenant(p.db, { projectRole: 'Admin' }),
    'an organization Admin': await createTenant(p.db, {
      projectRole: 'Admin',
      organizationRole: 'Admin',
    }),
  };
});
after(() => p.stop());

/** What an attacker sends to each operators' route: the change they would want. New routes get `{}`. */
function attackOn(route: RegisteredRoute, attacker: Tenant): { path: string; json?: unknown } {
  const path = route.path.replace(/\{([A-Za-z0-9_]+)\}/g, (_m, name: string) =>
    // Their own organization's beta features; any other id, one that exists nowhere.
    name === 'organizationId' ? attacker.organizationId : `nope-${name}`,
  );
  const bodies: Record<string, unknown> = {
    updateOrganizationFeatures: { billing_usage_enabled: true },
    injectFleetFault: { cluster_id: 'nope', kind: 'boot_failure', count: 1000 },
    setFleetCapacity: { region: 'us-central-8', gpu_type: 'H100_SXM', preemptible_nodes: 0 },
    setFleetWorkload: { pending_gpu_requests: 1000, idle_gpus: 0 },
    sendPreemptionNotice: { node_id: 'nope' },
    createConfig: { referenceModelId: 'gantry/reference-byte-tiny', selectors: [], projectId: attacker.projectId },
    setEndpointFaultInjection: { errorRate: 1, statusCode: 503 },
  };
  return {
    path,
    json: route.method === 'get' || route.method === 'delete' ? undefined : (bodies[route.operationId] ?? {}),
  };
}

describe('the admin key', () => {
  let adminRoutes: RegisteredRoute[];
  before(() => {
    adminRoutes = p.routes.filter((r) => r.access === 'platform-admin');
    // The operators' routes of today, so that a route dropped from the list by mistake shows.
    for (const id of ['getSystemStatus', 'createSelfCheck', 'updateOrganizationFeatures', 'setFleetCapacity'])
      assert.ok(
        adminRoutes.some((r) => r.operationId === id),
        `${id} is an operators' route`,
      );
  });

  test("an ordinary project key is refused on every operators' route, and nothing changes", async () => {
    const billing = (key: string) => call(p.baseUrl, 'GET', '/v1/billing/usage', { key });
    for (const [who, attacker] of Object.entries(attackers)) {
      for (const route of adminRoutes) {
        const attack = attackOn(route, attacker);
        const res = await call(p.baseUrl, route.method.toUpperCase(), attack.path, {
          key: attacker.key,
          json: attack.json,
        });
        assert.equal(res.status, 403, `${who}: ${route.method} ${attack.path}: ${JSON.stringify(res.body)}`);
        assert.equal(res.body.error.code, 'platform_admin_required', `${who}: ${route.operationId}`);
      }
      // The beta they asked for is still off for their organization.
      const report = await billing(attacker.key);
      assert.equal(report.body.error?.code, 'billing_usage_not_enabled', `${who}: ${JSON.stringify(report.body)}`);
    }
    // The same requests with the admin key pass the gate (what refused them was the key, not the request)...
    for (const route of adminRoutes) {
      const attack = attackOn(route, attackers['a project Admin']);
      const res = await call(p.baseUrl, route.method.toUpperCase(), attack.path, { key: admin.key, json: attack.json });
      assert.ok(![401, 403].includes(res.status), `admin: ${route.method} ${attack.path}: ${res.status}`);
    }
    // ...and the admin's switch is what turns the beta on.
    assert.equal((await billing(attackers['a project Admin'].key)).status, 200);
  });

  test("paths that spell an operators' route another way are not a way round the gate", async () => {
    const attacker = attackers['a project Admin'];
    for (const path of [
      '/v1/v1/system/status',
      '/v1/system/status/',
      '/v1//system/status',
      '/v1/SYSTEM/STATUS',
      '/v1/system/%73tatus',
      '/v1/system/./status',
      '/v1/compute/../system/status',
      '/system/status',
      '/v2/system/status',
      '/v3/system/status',
    ]) {
      const res = await call(p.baseUrl, 'GET', path, { key: attacker.key });
      assert.ok([403, 404].includes(res.status), `${path}: ${res.status} ${JSON.stringify(res.body)}`);
      assert.equal(res.body.database, undefined, path);
    }
  });

  test("a key that is nearly the admin key is refused on every operators' route", async () => {
    const key = admin.key;
    const flip = (c: string) => (c === 'A' ? 'B' : 'A');
    const revoked = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin', organizationRole: 'Admin' });
    await revokeApiKey(p.db, revoked.keyId);
    const attempts: Array<[string, Record<string, string>, string?]> = [
      ['no key', {}],
      ['an empty bearer', { authorization: 'Bearer ' }],
      ['a bare scheme', { authorization: 'Bearer' }],
      ['the last character changed', { authorization: `Bearer ${key.slice(0, -1)}${flip(key.at(-1)!)}` }],
      [
        'the first character after the prefix changed',
        { authorization: `Bearer gantry_${flip(key[7])}${key.slice(8)}` },
      ],
      ['one character short', { authorization: `Bearer ${key.slice(0, -1)}` }],
      ['one character more', { authorization: `Bearer ${key}x` }],
      ['the prefix only', { authorization: 'Bearer gantry_' }],
      ['upper case', { authorization: `Bearer ${key.toUpperCase()}` }],
      ['twice', { authorization: `Bearer ${key} ${key}` }],
      ['its SHA-256', { authorization: `Bearer ${createHash('sha256').update(key).digest('hex')}` }],
      ['under Basic', { authorization: `Basic ${Buffer.from(`${key}:`).toString('base64')}` }],
      ['under another scheme', { authorization: `Token ${key}` }],
      ['with no scheme', { authorization: key }],
      ['in the query', {}, `api_key=${key}`],
      ['a revoked admin key', { authorization: `Bearer ${revoked.key}` }],
      ['a revoked admin key, its last character changed', { authorization: `Bearer ${revoked.key.slice(0, -1)}A` }],
    ];
    for (const route of adminRoutes) {
      const attack = attackOn(route, attackers['a project Admin']);
      for (const [what, headers, query] of attempts) {
        const url = query ? `${attack.path}?${query}` : attack.path;
        const res = await call(p.baseUrl, route.method.toUpperCase(), url, { headers, json: attack.json });
        assert.equal(res.status, 401, `${what}: ${route.method} ${url}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }
    // The key itself works (what was refused was each near miss).
    assert.equal((await call(p.baseUrl, 'GET', '/v1/system/status', { key })).status, 200);
  });

  test('the admin key is in no log line of the API', async () => {
    // Requests that fail after authentication log a line with their principal: one of each kind.
    const key = admin.key;
    await call(p.baseUrl, 'GET', '/v1/system/self-checks/nope', { key });
    await call(p.baseUrl, 'PATCH', `/v1/admin/organizations/${admin.organizationId}`, {
      key,
      json: { billing_usage_enabled: key },
    });
    await call(p.baseUrl, 'GET', `/v1/files?after=${key}`, { key });
    await call(p.baseUrl, 'GET', `/v1/system/status?${key}=1`, { key });
    const logged = p.logs.text();
    assert.ok(logged.includes(admin.keyId), 'the log names requests by their key id: these requests were logged');
    // The secret part, less its last character: the near misses above contain it too.
    const secret = key.slice('gantry_'.length, -1);
    assert.equal(logged.includes(secret), false, 'the admin key (or most of it) is in the log');
  });

  test('the first start writes the admin key to its file only, not to its output', async () => {
    const { url, drop } = await createThrowawayDatabase(process.env.DATABASE_URL!, 'gantry_bootstrap');
    const dataDir = mkdtempSync(path.join(tmpdir(), 'gantry-bootstrap-'));
    const keyFile = path.join(dataDir, 'admin-api-key');
    try {
      const run = startProcess('scripts/bootstrap.ts', {
        DATABASE_URL: url,
        GANTRY_DATA_DIR: dataDir,
        GANTRY_ADMIN_KEY_FILE: keyFile,
        LOG_LEVEL: 'debug',
      });
      assert.deepEqual(await run.exited, { code: 0, signal: null }, JSON.stringify(run.lines));
      const key = readFileSync(keyFile, 'utf8').trim();
      assert.match(key, /^gantry_/);
      assert.equal(statSync(keyFile).mode & 0o077, 0, 'the key file is private to its owner');
      const output = run.lines.map((l) => JSON.stringify(l)).join('\n');
      assert.match(output, /admin API key/, 'the first start said what it made');
      assert.equal(output.includes(key.slice('gantry_'.length)), false, `the key is in the output:\n${output}`);
      // It is the installation's admin key.
      const db = createPool(url, 1);
      try {
        assert.equal((await findPrincipalByApiKey(db, key))?.isPlatformAdmin, true);
      } finally {
        await db.end();
      }
    } finally {
      await drop();
    }
  });
});
