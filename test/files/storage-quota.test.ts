/**
 * What a project stores stays within its storage quota (GANTRY_PROJECT_STORAGE_QUOTA_BYTES):
 * every way bytes arrive is checked (a direct upload, a pre-signed upload's
 * declared size and its PUT, a multipart upload, a storage object's PUT and
 * its parts, a registry model's uploaded parts and its imports by URL), a
 * refused upload stores nothing, deleting files makes room, and other projects
 * are not affected.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { safetensorsFile } from '../helpers/archives';

const QUOTA = 4096;
let p: TestPlatform;
let t: Tenant;
let weightsServer: Server;
let weightsOrigin: string;

const WEIGHTS_3K = safetensorsFile({ shape: [730] });
const WEIGHTS_2K = safetensorsFile({ shape: [480] });

before(async () => {
  p = await startTestPlatform({
    containers: false,
    env: { GANTRY_PROJECT_STORAGE_QUOTA_BYTES: String(QUOTA), GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' },
  });
  t = await createTenant(p.db);
  const bodies: Record<string, Buffer> = { '/3k.safetensors': WEIGHTS_3K, '/2k.safetensors': WEIGHTS_2K };
  weightsServer = createServer((req, res) => {
    const body = bodies[req.url ?? ''];
    res.writeHead(body ? 200 : 404, body ? { 'content-length': body.length } : {});
    res.end(body);
  });
  await new Promise<void>((r) => weightsServer.listen(0, '127.0.0.1', r));
  weightsOrigin = `http://127.0.0.1:${(weightsServer.address() as AddressInfo).port}`;
});
after(async () => {
  weightsServer.close();
  await p.stop();
});

const line = JSON.stringify({ text: 'x'.repeat(90) }) + '\n'; // 104 bytes
const content = (bytes: number) => line.repeat(Math.floor(bytes / line.length));

function upload(key: string, name: string, text: string) {
  const body = new FormData();
  body.append('purpose', 'fine-tune');
  body.append('file_name', name);
  body.append('file', new Blob([text]), name);
  return call(p.baseUrl, 'POST', '/v1/files/upload', { key, body });
}
const files = async (key: string) =>
  (await call(p.baseUrl, 'GET', '/v1/files', { key })).body.data as Array<{ id: string }>;

test('uploads stop at the quota, a refusal stores nothing, and deleting makes room', async () => {
  const first = await upload(t.key, 'a.jsonl', content(3000));
  assert.equal(first.status, 200, JSON.stringify(first.body));

  const direct = await upload(t.key, 'b.jsonl', content(2000));
  assert.equal(direct.status, 413);
  assert.deepEqual([direct.body.error.code, direct.body.error.param], ['storage_quota_exceeded', 'file']);
  assert.equal((await files(t.key)).length, 1, 'the refused upload left no file');
  const { rows } = await p.db.query('SELECT count(*)::int AS n FROM files WHERE project_id = $1', [t.projectId]);
  assert.equal(rows[0].n, 1);

  const declared = await call(p.baseUrl, 'POST', '/v1/files', {
    key: t.key,
    json: { purpose: 'fine-tune', file_name: 'c.jsonl', bytes: 2000 },
  });
  assert.deepEqual([declared.status, declared.body.error?.param], [413, 'bytes']);

  const multipart = await call(p.baseUrl, 'POST', '/v1/files/multipart/initiate', {
    key: t.key,
    json: { purpose: 'fine-tune', file_name: 'd.jsonl', file_size: 2000 },
  });
  assert.deepEqual([multipart.status, multipart.body.error?.param], [413, 'file_size']);

  // Another project has a quota of its own.
  const other = await createTenant(p.db);
  assert.equal((await upload(other.key, 'b.jsonl', content(2000))).status, 200);

  assert.equal((await call(p.baseUrl, 'DELETE', `/v1/files/${first.body.id}`, { key: t.key })).status, 200);
  assert.equal((await upload(t.key, 'b.jsonl', content(2000))).status, 200, 'room again');
});

test('a pre-signed PUT is checked against the quota with its Content-Length', async () => {
  const tenant = await createTenant(p.db);
  // No declared size: the URL is granted, and the PUT says how much is coming.
  const granted = await call(p.baseUrl, 'POST', '/v1/files', {
    key: tenant.key,
    json: { purpose: 'fine-tune', file_name: 'big.jsonl' },
  });
  assert.equal(granted.status, 302, JSON.stringify(granted.body));
  const put = await fetch(granted.headers.get('location')!, { method: 'PUT', body: content(QUOTA + 500) });
  assert.equal(put.status, 413);
  assert.equal(((await put.json()) as { error: { code: string } }).error.code, 'storage_quota_exceeded');
});

test("storage objects (the CLI's volume uploads) count in the quota, whole or in parts", async () => {
  const tenant = await createTenant(p.db);
  const grant = async (filename: string) =>
    (await call(p.baseUrl, 'POST', '/v1/storage/upload-request', { key: tenant.key, json: { filename } })).body
      .upload_url.url as string;
  assert.equal((await fetch(await grant('v/0/a.txt'), { method: 'PUT', body: content(3000) })).status, 200);
  const over = await fetch(await grant('v/0/b.txt'), { method: 'PUT', body: content(2000) });
  assert.equal(over.status, 413);
  assert.equal(((await over.json()) as { error: { code: string } }).error.code, 'storage_quota_exceeded');
  const init = await call(p.baseUrl, 'POST', '/v1/storage/multipart/init', {
    key: tenant.key,
    json: { filename: 'v/0/c.bin', parts_count: 1 },
  });
  const part = await fetch(init.body.part_upload_urls[0].url, { method: 'PUT', body: content(2000) });
  assert.equal(part.status, 413);
  // Files count against storage objects too: one quota for the project.
  assert.equal((await upload(tenant.key, 'd.jsonl', content(2000))).status, 413);
  const { rows } = await p.db.query(
    'SELECT count(*)::int AS n FROM storage_objects WHERE project_id = $1 AND uploaded_at IS NOT NULL',
    [tenant.projectId],
  );
  assert.equal(rows[0].n, 1, 'nothing refused was stored');

  // Parts not yet joined hold space too.
  const fresh = await createTenant(p.db);
  const parts = await call(p.baseUrl, 'POST', '/v1/storage/multipart/init', {
    key: fresh.key,
    json: { filename: 'w/0/e.bin', parts_count: 3 },
  });
  const putPart = (i: number) => fetch(parts.body.part_upload_urls[i].url, { method: 'PUT', body: content(2000) });
  assert.deepEqual([(await putPart(0)).status, (await putPart(1)).status, (await putPart(2)).status], [200, 200, 413]);
});

test('registry models count in the quota: an import stops at what is left, and so does an uploaded part', async () => {
  const tenant = await createTenant(p.db, { projectRole: 'Admin' });
  const v2 = (method: string, url: string, json?: unknown) =>
    call(p.baseUrl, method, `/v2/projects/${tenant.projectId}${url}`, { key: tenant.key, json });
  const model = await v2('POST', '/models', {
    baseModelId: 'gantry/reference-byte-tiny',
    name: 'quota',
    type: 'model',
  });
  assert.equal(model.status, 200, JSON.stringify(model.body));
  const importWeights = async (path: string) => {
    const started = await v2('POST', '/models/uploads', {
      modelId: model.body.id,
      remoteUrl: `${weightsOrigin}${path}`,
    });
    assert.equal(started.status, 200, JSON.stringify(started.body));
    return eventually(
      () => v2('GET', `/models/uploads/${started.body.id}`).then((r) => r.body),
      (u) => ['REMOTE_UPLOAD_STATUS_SUCCEEDED', 'REMOTE_UPLOAD_STATUS_FAILED'].includes(u.status),
    );
  };
  const fits = await importWeights('/3k.safetensors');
  assert.equal(fits.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', fits.statusMessage);

  // The revision's bytes count: a file that fit before no longer does.
  assert.equal((await upload(tenant.key, 'd.jsonl', content(2000))).status, 413);

  const over = await importWeights('/2k.safetensors');
  assert.equal(over.status, 'REMOTE_UPLOAD_STATUS_FAILED');
  assert.match(over.statusMessage, /more than the \d+ bytes the project's storage quota leaves/);
  const files = await v2('GET', `/models/${model.body.id}/files`);
  assert.deepEqual(
    files.body.data.map((f: { path: string }) => f.path),
    ['3k.safetensors'],
    'the refused import added nothing',
  );

  const plan = await v2('POST', '/models/upload/create', {
    objectId: model.body.id,
    files: [{ path: 'more.safetensors', hash: createHash('md5').update(WEIGHTS_2K).digest('hex'), numParts: 1 }],
  });
  assert.equal(plan.status, 200, JSON.stringify(plan.body));
  const part = await fetch(plan.body.files[0].parts[0].url, { method: 'PUT', body: WEIGHTS_2K });
  assert.equal(part.status, 413);
  assert.equal(((await part.json()) as { error: { code: string } }).error.code, 'storage_quota_exceeded');
});
