/**
 * The API forwarder of a container host (providers/containers/podman/api-forwarder.ts), the one
 * door from a project's bridge to the API: it passes each replica's request on with its API key,
 * and says which replica called (X-Forwarded-For, the replica's own address, whatever the replica
 * claimed). An API that trusts the host (GANTRY_TRUST_PROXY) then holds each replica to its own
 * address limit, so one tenant's busy replica does not spend another's. Here the forwarder
 * listens on 127.0.0.2 as on a bridge, and two replicas are the addresses 127.0.0.3 and 127.0.0.4.
 */
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, test } from 'node:test';
import { ApiForwarder } from '../../providers/containers/podman/api-forwarder';
import { startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const BURST = 3;
let p: TestPlatform;
let t: Tenant;
let forwarder: ApiForwarder;

before(async () => {
  p = await startTestPlatform({
    containers: false,
    env: {
      GANTRY_TRUST_PROXY: 'loopback',
      GANTRY_RATE_LIMIT_ADDRESS_PER_SECOND: '0.01',
      GANTRY_RATE_LIMIT_ADDRESS_BURST: String(BURST),
    },
  });
  t = await createTenant(p.db);
  forwarder = new ApiForwarder('127.0.0.2', { host: '127.0.0.1', port: Number(new URL(p.baseUrl).port) });
  await forwarder.start();
});
after(async () => {
  forwarder.close();
  await p.stop();
});

/** A request from the replica at `from`, through the forwarder. */
function fromReplica(
  from: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.2', port: forwarder.port, localAddress: from, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('a replica reaches the API with its key through the forwarder, and is limited by its own address', async () => {
  const models = await fromReplica('127.0.0.3', '/v1/models', { authorization: `Bearer ${t.key}` });
  assert.equal(models.status, 200, models.body);
  assert.ok(Array.isArray(JSON.parse(models.body)), 'the catalog, answered to the key the replica sent');

  // Replica A spends its address's burst (the authorized call above counted too) and is refused.
  const a: number[] = [];
  for (let i = 0; i < BURST; i++) a.push((await fromReplica('127.0.0.3', '/v1/models')).status);
  assert.deepEqual(a, [401, 401, 429], "127.0.0.3's burst of 3, then 429");
  const refused = await fromReplica('127.0.0.3', '/v1/models');
  assert.equal(refused.status, 429);
  assert.match(refused.body, /this client address/);

  // Replica B, on the same host, has its own: a byte forwarder made both one client (the host).
  // Nor can B pass itself off as anyone: what it claims is replaced by what the forwarder saw, so
  // claiming A's address is not refused with A's spent burst, and claiming a fresh one buys nothing.
  const b: number[] = [];
  for (const claimed of [undefined, '127.0.0.3', '127.0.0.9', undefined]) {
    const headers: Record<string, string> = claimed ? { 'x-forwarded-for': claimed } : {};
    b.push((await fromReplica('127.0.0.4', '/v1/models', headers)).status);
  }
  assert.deepEqual(b, [401, 401, 401, 429], "127.0.0.4's own burst, whatever it claimed");
});
