/**
 * Attack: make the API build one answer as large as a project can grow. `GET /v1/files`,
 * `GET /v1/deployments` and `GET /v1/deployments/storage/volumes` answered every row of the
 * project at once (and the last two query the database again per row), however many there were.
 *
 * Each list now answers a bounded page: unasked, up to 1000 rows (the official SDKs read these
 * lists whole and send no `limit`, so a project of ordinary size still sees everything), then
 * `next_cursor`; a `limit` above 1000 is a 400 naming it. Here a tenant holds more rows than that
 * (one made through the API, then copied in the database) and asks for its lists.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MAX = 1000;
const ROWS = MAX + 5;

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({ containers: false });
  t = await createTenant(p.db);
});
after(() => p.stop());

/**
 * Copies of row `id` of `table` until the project has `ROWS`, each with the changes `columns`
 * makes from the copy number `g` (SQL over the original row `r`), and created a millisecond apart.
 */
async function copyRow(table: string, id: string, columns: Record<string, string>) {
  const changes = Object.entries(columns)
    .map(([column, sql]) => `'${column}', ${sql}`)
    .join(', ');
  await p.db.query(
    `INSERT INTO ${table}
     SELECT (jsonb_populate_record(NULL::${table}, to_jsonb(r) || jsonb_build_object(${changes},
             'created_at', r.created_at - g * interval '1 millisecond'))).*
       FROM ${table} r, generate_series(1, ${ROWS - 1}) g
      WHERE r.id = $1`,
    [id],
  );
}

/** Every row of a list by following its cursor, and how many pages that took. */
async function followPages(path: string, limit?: number) {
  const ids: string[] = [];
  let pages = 0;
  let after: string | null = null;
  do {
    const query: URLSearchParams = new URLSearchParams({
      ...(after ? { after } : {}),
      ...(limit ? { limit: String(limit) } : {}),
    });
    const res = await call<{ data: Array<{ id: string }>; next_cursor: string | null }>(
      p.baseUrl,
      'GET',
      `${path}?${query}`,
      { key: t.key },
    );
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 500));
    ids.push(...res.body.data.map((row) => row.id));
    after = res.body.next_cursor;
    pages++;
    assert.ok(pages <= ROWS, 'the cursor moves on');
  } while (after);
  return { ids, pages };
}

async function boundedList(path: string) {
  const first = await call(p.baseUrl, 'GET', path, { key: t.key });
  assert.equal(first.status, 200, JSON.stringify(first.body).slice(0, 500));
  assert.equal(first.body.data.length, MAX, `${path}: one page of at most ${MAX}, not all ${ROWS}`);
  assert.equal(typeof first.body.next_cursor, 'string');

  const whole = await followPages(path);
  assert.equal(whole.pages, 2);
  assert.equal(new Set(whole.ids).size, ROWS, 'every row once, over the pages');
  const small = await followPages(path, 400);
  assert.deepEqual(small.ids, whole.ids, 'smaller pages, the same rows in the same order');

  const tooMany = await call(p.baseUrl, 'GET', `${path}?limit=${MAX + 1}`, { key: t.key });
  assert.equal(tooMany.status, 400);
  assert.equal(tooMany.body.error.param, 'limit');
  const badCursor = await call(p.baseUrl, 'GET', `${path}?after=not-a-cursor`, { key: t.key });
  assert.equal(badCursor.status, 400);
  assert.equal(badCursor.body.error.param, 'after');
}

describe('lists the SDKs read whole answer a bounded page', () => {
  test('GET /v1/files', async () => {
    const id = await uploadValidated(p, t.key, 'many.jsonl', '{"text": "a"}\n');
    await copyRow('files', id, { id: `r.id || '-' || g`, blob_key: `r.blob_key || '-' || g` });
    await boundedList('/v1/files');
  });

  test('GET /v1/deployments', async () => {
    const created = await call(p.baseUrl, 'POST', '/v1/deployments', {
      key: t.key,
      json: { name: 'many', image: 'example/http-replica:1', gpu_type: 'h100-80gb', min_replicas: 0 },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await copyRow('deployments', created.body.id, {
      id: `r.id || '-' || g`,
      name: `r.name || '-' || g`,
      workflow_id: `r.workflow_id || '-' || g`,
    });
    await boundedList('/v1/deployments');
  });

  test('GET /v1/deployments/storage/volumes', async () => {
    const created = await call(p.baseUrl, 'POST', '/v1/deployments/storage/volumes', {
      key: t.key,
      json: { name: 'many', type: 'readOnly', content: { type: 'files', source_prefix: 'many' } },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    await copyRow('deployment_volumes', created.body.id, { id: `r.id || '-' || g`, name: `r.name || '-' || g` });
    await p.db.query(
      `INSERT INTO deployment_volume_versions
       SELECT (jsonb_populate_record(NULL::deployment_volume_versions,
               to_jsonb(v) || jsonb_build_object('volume_id', c.id))).*
         FROM deployment_volume_versions v JOIN deployment_volumes c ON c.id LIKE v.volume_id || '-%'
        WHERE v.volume_id = $1`,
      [created.body.id],
    );
    await boundedList('/v1/deployments/storage/volumes');
  });
});
