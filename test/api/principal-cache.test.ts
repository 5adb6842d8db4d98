/**
 * API keys are resolved through a per-process cache, and the cache never
 * outlives a change: a revoked key is refused, and a changed role shows, as
 * soon as PostgreSQL's notification arrives (well under a second here), even
 * though the key was just used and sits in the cache. Unknown keys are cached
 * too, and a key created since is known at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant } from '../helpers/tenants';

let p: TestPlatform;
before(async () => {
  p = await startTestPlatform();
});
after(() => p.stop());

const whoami = (key: string) => call(p.baseUrl, 'GET', '/v1/whoami', { key });

/** Polls quickly: the point is how soon the change shows. */
async function within<T>(ms: number, fn: () => Promise<T>, done: (v: T) => boolean): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    if (done(await fn())) return Date.now() - t0;
    if (Date.now() - t0 > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('API key lookups (cached per process)', () => {
  test('a revoked key is refused at once, though it was cached a moment before', async () => {
    const t = await createTenant(p.db);
    for (let i = 0; i < 3; i++) assert.equal((await whoami(t.key)).status, 200);
    await p.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [t.keyId]);
    const ms = await within(
      1000,
      () => whoami(t.key),
      (r) => r.status === 401,
    );
    assert.ok(ms < 1000);
    const later = await whoami(t.key);
    assert.equal(later.status, 401);
    assert.equal(later.body.error.message, 'Invalid API key.');
  });

  test('a role change shows on the next requests; other keys keep working', async () => {
    const t = await createTenant(p.db, { projectRole: 'Editor' });
    const bystander = await createTenant(p.db);
    assert.equal((await whoami(t.key)).body.project_role, 'Editor');
    await p.db.query(`UPDATE project_members SET role = 'Admin' WHERE project_id = $1 AND user_id = $2`, [
      t.projectId,
      t.userId,
    ]);
    await within(
      1000,
      () => whoami(t.key),
      (r) => r.body.project_role === 'Admin',
    );
    assert.equal((await whoami(bystander.key)).status, 200);
  });

  test("a key's use is recorded", async () => {
    const t = await createTenant(p.db);
    const lastUsed = async () =>
      (await p.db.query('SELECT last_used_at FROM api_keys WHERE id = $1', [t.keyId])).rows[0].last_used_at;
    assert.equal(await lastUsed(), null);
    await whoami(t.key);
    await whoami(t.key);
    assert.ok((await lastUsed()) instanceof Date);
  });

  test('a made-up key costs one lookup, not one per request; a key created since works at once', async () => {
    const t = await createTenant(p.db);
    const { rows } = await p.db.query('SELECT * FROM api_keys WHERE id = $1', [t.keyId]);
    await p.db.query('DELETE FROM api_keys WHERE id = $1', [t.keyId]);
    await within(
      1000,
      () => whoami(t.key),
      (r) => r.status === 401,
    );

    let lookups = 0;
    const count = () => lookups++;
    p.db.on('acquire', count);
    for (let i = 0; i < 50; i++) assert.equal((await whoami(t.key)).status, 401);
    p.db.off('acquire', count);
    assert.ok(lookups < 10, `${lookups} connections taken for 50 requests with one unknown key`);

    // The same key comes (back) into existence: the cached "unknown" is dropped by the notification.
    const columns = Object.keys(rows[0]);
    await p.db.query(
      `INSERT INTO api_keys (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`,
      columns.map((c) => rows[0][c]),
    );
    await within(
      1000,
      () => whoami(t.key),
      (r) => r.status === 200,
    );
  });
});
