/**
 * Attack: hammer the API through a pre-signed URL. Signed routes (uploads and downloads whose URL
 * is their own credential) were mounted before the rate limiter, so a burst on one was never
 * refused, where the same burst on any other route got 429 from the per-address limit.
 *
 * Here a tenant takes the signed upload URL of the official SDKs' file flow and sends a burst of
 * PUTs to it, against an API of this platform whose per-address limit is small (3 at once).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { createApp } from '../../api/app';
import { createLogger } from '../../platform/logger';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const BURST = 3;

let p: TestPlatform;
let t: Tenant;
let limited: Server;
let limitedUrl: string;

before(async () => {
  p = await startTestPlatform({ containers: false });
  t = await createTenant(p.db);
  // The same platform (database, keys that sign URLs), with a small per-address limit.
  const config = { ...p.config, addressRateLimit: { perSecond: 0.1, burst: BURST } };
  limited = createServer(
    createApp({ config, db: p.db, temporal: p.temporal, logger: createLogger('api', 'silent'), blobs: p.blobs }),
  );
  await new Promise<void>((resolve) => limited.listen(0, '127.0.0.1', resolve));
  limitedUrl = `http://127.0.0.1:${(limited.address() as AddressInfo).port}`;
});
after(async () => {
  limited.close();
  await p.stop();
});

test('a burst on a signed URL gets 429 once past the per-address limit, as other routes do', async () => {
  const started = await call(p.baseUrl, 'POST', '/v1/files', {
    key: t.key,
    body: new URLSearchParams({ file_name: 'train.jsonl', file_type: 'jsonl', purpose: 'fine-tune' }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(started.status, 302);
  const signed = new URL(started.headers.get('location')!);
  assert.match(signed.search, /signature=/);

  const answers = [];
  for (let i = 0; i < BURST + 3; i++) {
    const res = await fetch(`${limitedUrl}${signed.pathname}${signed.search}`, {
      method: 'PUT',
      body: '{"text": "a"}\n',
    });
    const body = (await res.json().catch(() => ({}))) as { error?: { message: string } };
    answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), message: body.error?.message });
  }
  const statuses = answers.map((a) => a.status);
  // The route answers the first ones (the upload, then "already used"); past the burst, the limiter does.
  assert.equal(statuses[0], 200, JSON.stringify(answers));
  assert.ok(
    statuses.slice(0, BURST).every((s) => s !== 429),
    JSON.stringify(answers),
  );
  assert.deepEqual(statuses.slice(BURST), [429, 429, 429], JSON.stringify(answers));
  const refused = answers[BURST]!;
  assert.ok(Number(refused.retryAfter) >= 1);
  assert.match(refused.message ?? '', /this client address/);
});
