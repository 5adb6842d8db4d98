/**
 * Deployment volumes through the API: a volume is the project's uploaded files
 * under a name prefix, versioned on each content change; a deployment mounts a
 * pinned version read-only at its mount path (on the process runtime: under
 * the replica's working directory), keeps it until it is updated, and holds
 * the volume (no delete or rename while mounted) and its files (no delete
 * while the volume exists). Another project sees none of it.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { storeValidatedRevision } from '../helpers/models';
import { createTenant, type Tenant } from '../helpers/tenants';

const SERVER = path.resolve(__dirname, '../../examples/http-replica/server.mjs');
let p: TestPlatform;
let t: Tenant;
let other: Tenant;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
  other = await createTenant(p.db);
});
after(() => p.stop());

const api = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v1${url}`, { key, json });
const line = (n: number) => JSON.stringify({ text: `line ${n}` }) + '\n';

async function runningPorts(deploymentId: string, revision?: number) {
  const { rows } = await p.db.query<{ port: number; revision: number }>(
    `SELECT port, revision FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`,
    [deploymentId],
  );
  return rows.filter((r) => revision === undefined || r.revision === revision).map((r) => r.port);
}
const readThrough = async (port: number, file: string) => {
  const res = await fetch(`http://127.0.0.1:${port}/file?path=${encodeURIComponent(file)}`);
  return { status: res.status, text: await res.text() };
};

describe('deployment volumes', () => {
  test('a mounted volume shows its files to replicas; versions are pinned; in-use volumes and files are held', async () => {
    const a = await uploadValidated(p, t.key, 'assets-a.jsonl', line(1));
    await uploadValidated(p, t.key, 'assets-b.jsonl', line(2));
    await uploadValidated(p, t.key, 'notes.jsonl', line(3));

    const created = await api('POST', '/deployments/storage/volumes', {
      name: 'assets',
      type: 'readOnly',
      content: { type: 'files', source_prefix: 'assets-' },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal(created.body.object, 'volume');
    assert.equal(created.body.current_version, 1);
    assert.deepEqual(
      created.body.content.files.map((f: { name: string }) => f.name),
      ['assets-a.jsonl', 'assets-b.jsonl'],
      'only files under the prefix',
    );
    assert.equal(created.body.content.files[0].size, Buffer.byteLength(line(1)));
    const dup = await api('POST', '/deployments/storage/volumes', {
      name: 'assets',
      type: 'readOnly',
      content: { source_prefix: 'x' },
    });
    assert.equal(dup.status, 409);

    // Bad mounts are refused before anything runs.
    const base = {
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, SERVER],
      health_check_path: '/health',
      min_replicas: 1,
      termination_grace_period_seconds: 1,
    };
    for (const [volumes, param] of [
      [[{ name: 'assets', mount_path: 'data' }], 'volumes[0].mount_path'],
      [[{ name: 'assets', mount_path: '/data/../../etc' }], 'volumes[0].mount_path'],
      [[{ name: 'assets', mount_path: '/' }], 'volumes[0].mount_path'],
      [[{ name: 'nope', mount_path: '/data' }], 'volumes[0].name'],
      [[{ name: 'assets', mount_path: '/data', version: 7 }], 'volumes[0].version'],
      // Where every replica finds its deployment's adapters.
      [[{ name: 'assets', mount_path: '/gantry' }], 'volumes[0].mount_path'],
      [[{ name: 'assets', mount_path: '/gantry/adapters/x' }], 'volumes[0].mount_path'],
      [
        [
          { name: 'assets', mount_path: '/data' },
          { name: 'assets', mount_path: '/data/x' },
        ],
        'volumes[1].mount_path',
      ],
    ] as const) {
      const res = await api('POST', '/deployments', { ...base, name: 'bad-mount', volumes });
      assert.equal(res.status, 400, JSON.stringify(volumes));
      assert.equal(res.body.error.param, param, JSON.stringify(res.body));
    }

    const dep = await api('POST', '/deployments', {
      ...base,
      name: 'reader',
      volumes: [{ name: 'assets', mount_path: '/data/assets' }],
    });
    assert.equal(dep.status, 200, JSON.stringify(dep.body));
    assert.deepEqual(dep.body.volumes, [{ name: 'assets', mount_path: '/data/assets', version: 1 }], 'pinned');
    await eventually(
      () => api('GET', '/deployments/reader').then((r) => r.body),
      (d) => d.status === 'Ready',
    );
    const [port] = await runningPorts(dep.body.id);
    assert.deepEqual(await readThrough(port, 'data/assets/assets-a.jsonl'), { status: 200, text: line(1) });
    assert.deepEqual(await readThrough(port, 'data/assets/assets-b.jsonl'), { status: 200, text: line(2) });
    assert.equal((await readThrough(port, 'data/assets/notes.jsonl')).status, 404);

    const held = await api('GET', '/deployments/storage/volumes/assets');
    assert.deepEqual(held.body.mounted_by, [dep.body.id]);
    const delVolume = await api('DELETE', '/deployments/storage/volumes/assets');
    assert.equal(delVolume.status, 409);
    assert.equal(delVolume.body.error.code, 'volume_in_use');
    assert.equal((await api('PATCH', '/deployments/storage/volumes/assets', { name: 'renamed' })).status, 409);
    const delFile = await api('DELETE', `/files/${a}`);
    assert.equal(delFile.status, 409, 'a volume holds its files');
    assert.match(delFile.body.error.message, /deployment-volume\//);

    // New content is a new version; the deployment keeps version 1 until it is updated.
    await uploadValidated(p, t.key, 'assets-c.jsonl', line(4));
    const v2 = await api('PATCH', '/deployments/storage/volumes/assets', { content: { source_prefix: 'assets-' } });
    assert.equal(v2.status, 200, JSON.stringify(v2.body));
    assert.equal(v2.body.current_version, 2);
    assert.equal(v2.body.content.files.length, 3);
    assert.deepEqual(v2.body.mounted_by, []);
    assert.deepEqual(v2.body.version_history['1'].mounted_by, [dep.body.id]);
    assert.equal(v2.body.version_history['2'].content.source_prefix, 'assets-');
    const v1 = await api('GET', '/deployments/storage/volumes/assets?version=1');
    assert.equal(v1.body.content.files.length, 2);
    assert.equal((await api('GET', '/deployments/storage/volumes/assets?version=9')).status, 404);
    assert.equal((await readThrough(port, 'data/assets/assets-c.jsonl')).status, 404, 'still on version 1');

    const upd = await api('PATCH', '/deployments/reader', {
      volumes: [{ name: 'assets', mount_path: '/data/assets' }],
    });
    assert.equal(upd.status, 200, JSON.stringify(upd.body));
    assert.equal(upd.body.volumes[0].version, 2);
    const [port2] = await eventually(
      () => runningPorts(dep.body.id, 2),
      (ports) => ports.length === 1,
    );
    assert.deepEqual(await readThrough(port2, 'data/assets/assets-c.jsonl'), { status: 200, text: line(4) });

    // Another project sees nothing and cannot mount it.
    assert.equal((await api('GET', '/deployments/storage/volumes/assets', undefined, other.key)).status, 404);
    assert.deepEqual((await api('GET', '/deployments/storage/volumes', undefined, other.key)).body.data, []);
    const foreign = await api(
      'POST',
      '/deployments',
      { ...base, name: 'thief', volumes: [{ name: 'assets', mount_path: '/data' }] },
      other.key,
    );
    assert.equal(foreign.status, 400);
    assert.equal(foreign.body.error.param, 'volumes[0].name');

    // Once no deployment mounts it, it can go, and so can its files.
    assert.equal((await api('DELETE', '/deployments/reader')).status, 200);
    await eventually(
      () => api('GET', '/deployments/reader').then((r) => r.status),
      (s) => s === 404,
    );
    assert.equal((await api('DELETE', '/deployments/storage/volumes/assets')).status, 200);
    assert.equal((await api('GET', '/deployments/storage/volumes/assets')).status, 404);
    assert.equal((await api('DELETE', `/files/${a}`)).status, 200);
  });

  test('a file name that would climb out of the volume is refused', async () => {
    await uploadValidated(p, t.key, 'evil/../../escape.jsonl', line(1));
    const res = await api('POST', '/deployments/storage/volumes', {
      name: 'evil',
      type: 'readOnly',
      content: { type: 'files', source_prefix: 'evil/' },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.param, 'content.source_prefix');
    assert.match(res.body.error.message, /cannot be a path inside a volume/);
  });

  test('model mounts: a registered model revision appears read-only at its mount path', async () => {
    const v2 = (method: string, url: string, json?: unknown) =>
      call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });
    const model = (
      await v2('POST', '/models', { baseModelId: 'gantry/reference-byte-tiny', name: 'mounted', type: 'model' })
    ).body;
    const base = {
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, SERVER],
      health_check_path: '/health',
      min_replicas: 1,
      termination_grace_period_seconds: 1,
    };
    const early = await api('POST', '/deployments', {
      ...base,
      name: 'model-reader',
      model_mounts: [{ model_id: 'mounted', mount_path: '/models/m' }],
    });
    assert.equal(early.status, 400, 'no weights yet');
    assert.equal(early.body.error.param, 'model_mounts[0].model_id');

    const weights = Buffer.from('pretend safetensors');
    await storeValidatedRevision(p, model.id, 'rv_m1', { 'model.safetensors': weights });
    const dep = await api('POST', '/deployments', {
      ...base,
      name: 'model-reader',
      model_mounts: [{ model_id: 'mounted', mount_path: '/models/m' }],
    });
    assert.equal(dep.status, 200, JSON.stringify(dep.body));
    assert.deepEqual(dep.body.model_mounts, [{ model_id: model.id, mount_path: '/models/m', revision_id: 'rv_m1' }]);
    await eventually(
      () => api('GET', '/deployments/model-reader').then((r) => r.body),
      (d) => d.status === 'Ready',
    );
    const [port] = await runningPorts(dep.body.id);
    assert.deepEqual(await readThrough(port, 'models/m/model.safetensors'), { status: 200, text: weights.toString() });
    assert.equal((await api('DELETE', '/deployments/model-reader')).status, 200);
  });
});
