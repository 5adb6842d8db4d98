/**
 * Volumes with the official Python CLI's `beta jig volumes` (PyPI `together`, pinned): `create`
 * makes the volume, then uploads a directory through `/v1/storage/*`; `update` uploads a new
 * version's files, then points the volume at them. A replica that mounts the volume reads the
 * files at the paths they had in the directory; a deployment keeps the version it mounted.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { HTTP_REPLICA } from '../helpers/deployments';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { together, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let other: Tenant;
let cli: PythonClient;
const dir = mkdtempSync(path.join(tmpdir(), 'gantry-jig-volumes-'));

/** A directory with these files (paths relative to it). */
function tree(name: string, files: Record<string, string>): string {
  const root = path.join(dir, name);
  for (const [file, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), text);
  }
  return root;
}

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
  other = await createTenant(p.db);
  cli = { baseUrl: p.baseUrl, key: t.key, cwd: dir };
  writeFileSync(path.join(dir, 'jig.toml'), 'name = "volume-user"\n[deploy]\nimage = "example/http-replica:1"\n');
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v1${url}`, { key, json });
const jig = (...args: string[]) => together(cli, '--project', t.projectId, 'beta', 'jig', ...args);
const names = (v: { content: { files: Array<{ name: string }> } }) => v.content.files.map((f) => f.name);

async function replicaPort(deploymentId: string): Promise<number> {
  const { rows } = await p.db.query<{ port: number }>(
    `SELECT port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
    [deploymentId],
  );
  return rows[0].port;
}
const read = async (port: number, file: string) =>
  (await fetch(`http://127.0.0.1:${port}/file?path=${encodeURIComponent(file)}`)).text();

let deploymentId: string;

test('jig volumes create uploads a directory; a replica that mounts the volume reads its files', async () => {
  const src = tree('v0', { 'a.txt': 'alpha', 'sub/b.txt': 'beta' });
  const out = await jig('volumes', 'create', '--name', 'data', '--source', src);
  assert.match(out, /Volume created/);
  assert.match(out, /Upload completed/);

  const volume = (await api('GET', '/deployments/storage/volumes/data')).body;
  assert.equal(volume.content.source_prefix, 'data/0');
  assert.deepEqual(names(volume), ['a.txt', 'sub/b.txt'], 'named as in the directory');
  // Another project's volume on the same prefix sees none of them.
  const theirs = await api(
    'POST',
    '/deployments/storage/volumes',
    { name: 'data', type: 'readOnly', content: { type: 'files', source_prefix: 'data/0' } },
    other.key,
  );
  assert.equal(theirs.status, 200, JSON.stringify(theirs.body));
  assert.deepEqual(names(theirs.body), []);

  const deployed = await api('POST', '/deployments', {
    name: 'reader',
    image: 'example/http-replica:1',
    command: [process.execPath, HTTP_REPLICA],
    gpu_type: 'h100-80gb',
    health_check_path: '/health',
    min_replicas: 1,
    max_replicas: 1,
    volumes: [{ name: 'data', mount_path: '/data' }],
  });
  assert.equal(deployed.status, 200, JSON.stringify(deployed.body));
  deploymentId = deployed.body.id;
  await eventually(
    () => api('GET', '/deployments/reader').then((r) => r.body),
    (d) => d.status === 'Ready',
    60_000,
  );
  const port = await replicaPort(deploymentId);
  assert.equal(await read(port, 'data/a.txt'), 'alpha');
  assert.equal(await read(port, 'data/sub/b.txt'), 'beta');
});

test('jig volumes update makes a new version; the deployment keeps the one it mounted', async () => {
  const before = (await api('GET', '/deployments/storage/volumes/data')).body;
  const src = tree('v1', { 'a.txt': 'alpha, again' });
  assert.match(await jig('volumes', 'update', '--name', 'data', '--source', src), /Volume updated successfully/);
  const after = (await api('GET', '/deployments/storage/volumes/data')).body;
  assert.equal(after.current_version, before.current_version + 1);
  assert.deepEqual(names(after), ['a.txt']);
  // The first version still holds what it was made from.
  const first = (await api('GET', `/deployments/storage/volumes/data?version=${before.current_version}`)).body;
  assert.deepEqual(names(first), ['a.txt', 'sub/b.txt']);
  assert.equal(await read(await replicaPort(deploymentId), 'data/a.txt'), 'alpha', 'pinned to its version');
});

test("a file at or over the CLI's multipart threshold goes up in parts and arrives whole", async () => {
  // 2.5 MiB of text with the threshold and the part size at 1 MiB: three parts.
  const big = Array.from({ length: 40_000 }, (_, i) => `line ${String(i).padStart(58, '0')}\n`).join('');
  const src = tree('v2', { 'a.txt': 'alpha, third', 'weights/big.txt': big });
  const inParts = { ...cli, env: { TOGETHER_MULTIPART_THRESHOLD_MB: '1', TOGETHER_MULTIPART_CHUNK_SIZE_MB: '1' } };
  await together(
    inParts,
    '--project',
    t.projectId,
    'beta',
    'jig',
    'volumes',
    'update',
    '--name',
    'data',
    '--source',
    src,
  );
  const volume = (await api('GET', '/deployments/storage/volumes/data')).body;
  assert.deepEqual(names(volume), ['a.txt', 'weights/big.txt']);
  assert.equal(volume.content.files[1].size, Buffer.byteLength(big));
  assert.match(p.logs.text(), /\/v1\/storage\/multipart\/complete/, 'it went up in parts');
  const parts = await p.db.query('SELECT 1 FROM storage_object_parts');
  assert.equal(parts.rowCount, 0, 'the joined parts are gone');

  // The deployment takes the new version when it is updated, and its replica reads the joined file.
  const updated = await api('PATCH', '/deployments/reader', { volumes: [{ name: 'data', mount_path: '/data' }] });
  assert.equal(updated.status, 200, JSON.stringify(updated.body));
  const port = await eventually(
    async () => {
      const r = await p.db.query<{ port: number }>(
        `SELECT port FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running' AND revision > 1`,
        [deploymentId],
      );
      return r.rows[0]?.port;
    },
    (x) => x !== undefined,
    60_000,
  );
  assert.equal(await read(port, 'data/weights/big.txt'), big);
});

test('storage paths are checked, a signed URL takes one PUT, and parts are checked by their ETags', async () => {
  const bad = await api('POST', '/storage/upload-request', { filename: 'data/../escape.txt' });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, 'filename');

  const granted = await api('POST', '/storage/upload-request', { filename: 'loose/c.txt' });
  assert.equal(granted.status, 200, JSON.stringify(granted.body));
  const { url, method } = granted.body.upload_url;
  assert.equal(method, 'PUT');
  const put = () => fetch(url, { method: 'PUT', body: 'gamma' });
  assert.equal((await put()).status, 200);
  assert.equal((await put()).status, 409, 'single use');
  const forged = url.replace(/signature=[0-9a-f]+/, `signature=${'0'.repeat(64)}`);
  assert.equal((await fetch(forged, { method: 'PUT', body: 'x' })).status, 403);

  const init = await api('POST', '/storage/multipart/init', { filename: 'loose/big.bin', parts_count: 2 });
  assert.equal(init.status, 200, JSON.stringify(init.body));
  const { upload_id, part_upload_urls } = init.body;
  const first = await fetch(part_upload_urls[0].url, { method: 'PUT', body: 'part one' });
  const etag = first.headers.get('etag')!.replace(/"/g, '');
  const complete = (parts: unknown) =>
    api('POST', '/storage/multipart/complete', { filename: 'loose/big.bin', upload_id, parts });
  const missing = await complete([
    { part_number: 1, etag },
    { part_number: 2, etag },
  ]);
  assert.equal(missing.status, 400);
  assert.equal(missing.body.error.param, 'parts[1].part_number');
  const wrong = await complete([{ part_number: 1, etag: 'f'.repeat(32) }]);
  assert.equal(wrong.body.error.code, 'etag_mismatch');
  // Another project cannot touch the upload.
  const theirs = await api('POST', '/storage/multipart/abort', { filename: 'loose/big.bin', upload_id }, other.key);
  assert.equal(theirs.status, 404);
  assert.equal((await api('POST', '/storage/multipart/abort', { filename: 'loose/big.bin', upload_id })).status, 200);
  const left = await p.db.query('SELECT 1 FROM storage_object_parts WHERE object_id = $1', [upload_id]);
  assert.equal(left.rowCount, 0, 'abort drops the parts');
  assert.equal((await complete([{ part_number: 1, etag }])).status, 404, 'and the upload');
});

test('deleting a volume removes the storage objects it alone held', async () => {
  assert.equal((await api('DELETE', '/deployments/reader')).status, 200);
  const held = async (prefix: string) =>
    (
      await p.db.query<{ blob_key: string }>(
        'SELECT blob_key FROM storage_objects WHERE project_id = $1 AND starts_with(path, $2) AND uploaded_at IS NOT NULL',
        [t.projectId, prefix],
      )
    ).rows.map((r) => r.blob_key);
  const blobs = await held('data/');
  assert.ok(blobs.length >= 3, `the volume's uploads are there (${blobs.length})`);
  const deleted = await eventually(
    () => api('DELETE', '/deployments/storage/volumes/data'),
    (r) => r.status === 200, // once the deployment's replicas are gone, nothing mounts it
    30_000,
  );
  assert.equal(deleted.body.deleted, true);
  assert.deepEqual(await held('data/'), [], 'its storage objects are gone');
  for (const key of blobs) assert.equal(await p.blobs.size(key), null, `blob ${key} is gone`);
  assert.equal((await held('loose/')).length, 1, 'an object no volume named stays');
});
