/**
 * Rate limits beyond the per-key one: a project's keys share a limit (keys can
 * be minted without limit), requests are limited per client address before
 * authentication (made-up keys included), and the inference gateway enforces
 * the same limits as the API.
 */
import assert from 'node:assert/strict';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { createApp } from '../../api/app';
import { createGatewayHandler } from '../../gateway/app';
import type { GantryConfig } from '../../platform/config';
import { createLogger } from '../../platform/logger';
import { createApiKey } from '../../db/accounts';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant } from '../helpers/tenants';

let p: TestPlatform;
const servers: Server[] = [];

before(async () => {
  p = await startTestPlatform({ containers: false });
});
after(async () => {
  for (const s of servers) s.close();
  await p.stop();
});

/** An API or gateway of the test platform with its own limits, on its own port. */
async function serve(kind: 'api' | 'gateway', limits: Partial<GantryConfig>): Promise<string> {
  const config = { ...p.config, ...limits };
  const logger = createLogger(kind, 'silent');
  const app: RequestListener =
    kind === 'api'
      ? createApp({ config, db: p.db, temporal: p.temporal, logger, blobs: p.blobs })
      : createGatewayHandler({ config, db: p.db, logger });
  const server = createServer(app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const PROJECT_LIMIT = { projectRateLimit: { perSecond: 0.5, burst: 4 } };

describe('rate limits', () => {
  test("a project's keys share its limit; another project is not limited by it", async () => {
    const api = await serve('api', PROJECT_LIMIT);
    const t = await createTenant(p.db);
    const second = await createApiKey(p.db, { projectId: t.projectId, userId: t.userId, name: 'second' });
    const other = await createTenant(p.db);
    const statuses = [];
    const headers = [];
    for (const key of [t.key, second.secret, t.key, second.secret, t.key, second.secret]) {
      const res = await call(api, 'GET', '/v1/whoami', { key });
      statuses.push(res.status);
      headers.push(`${res.headers.get('x-ratelimit-limit')} ${res.headers.get('x-ratelimit-remaining')}`);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429], 'four in all, whichever key');
    // The project's limit is the last checked and the tightest here: its headers are the ones seen.
    assert.deepEqual(headers, ['4 3', '4 2', '4 1', '4 0', '4 0', '4 0']);
    const refused = await call(api, 'GET', '/v1/whoami', { key: second.secret });
    assert.match(refused.body.error.message, /this project/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    assert.equal((await call(api, 'GET', '/v1/whoami', { key: other.key })).status, 200);
  });

  test('made-up keys are limited per client address before any lookup', async () => {
    const api = await serve('api', { addressRateLimit: { perSecond: 0.5, burst: 3 } });
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push((await call(api, 'GET', '/v1/whoami', { key: `made-up-${i}` })).status);
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    const refused = await call(api, 'GET', '/v1/whoami');
    assert.equal(refused.status, 429, 'no key at all: the same address limit');
    assert.match(refused.body.error.message, /this client address/);
  });

  test('the gateway enforces the project limit too', async () => {
    const gateway = await serve('gateway', PROJECT_LIMIT);
    const t = await createTenant(p.db);
    const statuses = [];
    for (let i = 0; i < 6; i++)
      statuses.push((await call(gateway, 'GET', '/v1/deployments/none/x', { key: t.key })).status);
    assert.deepEqual(statuses.slice(4), [429, 429], statuses.join(' '));
    assert.ok(!statuses.slice(0, 4).includes(429), statuses.join(' '));
  });
});
