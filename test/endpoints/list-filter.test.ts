/**
 * `filter` and `orderBy` on the endpoint list, as the SDKs describe them (api/list-filter.ts):
 * names exact, by wildcard, by substring, as `<project_slug>/<name>`; times compared; AND;
 * OR and NOT refused by name; pages that follow the order asked for.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
const created: Record<string, string> = {};

before(async () => {
  p = await startTestPlatform({ containers: false });
  t = await createTenant(p.db);
  for (const name of ['chat-a', 'chat-b', 'embed-x']) {
    const res = await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/endpoints`, { key: t.key, json: { name } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    created[name] = res.body.createdAt;
  }
});
after(() => p.stop());

const list = (query: Record<string, string>) =>
  call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints?${new URLSearchParams(query)}`, { key: t.key });
const names = async (query: Record<string, string>) => {
  const res = await list(query);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.data.map((e: { name: string }) => e.name);
};

test('names: exact, qualified, wildcard, substring, not equal', async () => {
  assert.deepEqual(await names({ filter: 'name="chat-a"' }), ['chat-a']);
  assert.deepEqual(await names({ filter: `name="${t.projectSlug}/chat-b"` }), ['chat-b']);
  assert.deepEqual((await names({ filter: 'name="chat-*"' })).sort(), ['chat-a', 'chat-b']);
  assert.deepEqual(await names({ filter: 'name:"bed"' }), ['embed-x']);
  assert.deepEqual((await names({ filter: 'name!="embed-x"' })).sort(), ['chat-a', 'chat-b']);
  assert.deepEqual(await names({ filter: 'name="nothing"' }), []);
});

test('times compared and joined with AND; orderBy and pages follow it', async () => {
  const since = created['chat-b']!;
  assert.deepEqual((await names({ filter: `created_at >= "${since}" AND name="chat-*"` })).sort(), ['chat-b']);
  assert.deepEqual(await names({ orderBy: 'created_at asc' }), ['chat-a', 'chat-b', 'embed-x']);
  assert.deepEqual(await names({}), ['embed-x', 'chat-b', 'chat-a'], 'newest first by default');

  const first = await list({ orderBy: 'created_at asc', limit: '2' });
  assert.deepEqual(
    first.body.data.map((e: { name: string }) => e.name),
    ['chat-a', 'chat-b'],
  );
  const second = await list({ orderBy: 'created_at asc', limit: '2', after: first.body.next_cursor });
  assert.deepEqual(
    second.body.data.map((e: { name: string }) => e.name),
    ['embed-x'],
  );
  assert.equal(second.body.next_cursor, null);
});

test('what the filter cannot say is a 400 naming it', async () => {
  const tooLong = `name="${'*a'.repeat(100)}"`; // over the 200 characters a filter may have
  for (const filter of [
    'name="a" OR name="b"',
    'NOT name="a"',
    'size > 3',
    'created_at > "yesterday"',
    'name > "a"',
    tooLong,
  ]) {
    const res = await list({ filter });
    assert.equal(res.status, 400, filter);
    assert.equal(res.body.error.param, 'filter', filter);
  }
  const order = await list({ orderBy: 'name' });
  assert.equal(order.status, 400);
  assert.equal(order.body.error.param, 'orderBy');
});
