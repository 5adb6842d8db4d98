/**
 * Remote model uploads (`/v2/projects/{projectId}/models/uploads`): files and
 * archives (.tar.zst, .tar.gz, a bare .safetensors) served over HTTP by the test
 * become a revision of a registered model, as the workflow model-upload/<id>,
 * with events saying what happened. A dropped connection is retried (the
 * restart count shows it); a credential reaches the source but is never shown;
 * refused URLs, unsafe archive paths and files without weights fail with a
 * reason.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buffer } from 'node:stream/consumers';
import { gzipSync } from 'node:zlib';
import { existsSync, readdirSync } from 'node:fs';
import { MAX_EXPANSION } from '../../activities/model-uploads';
import { after, before, describe, test } from 'node:test';
import { searchedAsItEnded } from '../helpers/operator-view';
import tar from 'tar-stream';
import { tarZstStream } from '../../providers/archive/tar-zst';
import { Readable } from 'node:stream';
import { checkRemoteUrl } from '../../providers/remote/fetch-remote';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { safetensorsFile } from '../helpers/archives';

const TOKEN = 'hf_secret-token-123';
let p: TestPlatform;
let t: Tenant;
let server: Server;
let origin: string;
const hits = new Map<string, number>();

const WEIGHTS = safetensorsFile();
const CONFIG = Buffer.from(JSON.stringify({ architectures: ['TinyForCausalLM'] }));

async function tarOf(files: Record<string, Buffer>): Promise<Buffer> {
  const pack = tar.pack();
  for (const [name, content] of Object.entries(files)) pack.entry({ name }, content);
  pack.finalize();
  return buffer(Readable.from(pack));
}

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' } });
  t = await createTenant(p.db);
  const files = { 'model.safetensors': WEIGHTS, 'config.json': CONFIG };
  const bodies: Record<string, Buffer> = {
    '/model.tar.zst': await buffer(
      tarZstStream(
        Object.entries(files).map(([name, c]) => ({ name, size: c.length, open: () => Readable.from([c]) })),
      ),
    ),
    '/model.tar.gz': gzipSync(await tarOf(files)),
    '/weights.safetensors': WEIGHTS,
    '/private.tar': await tarOf(files),
    '/evil.tar': await tarOf({ '../escape.safetensors': WEIGHTS }),
    '/notes.tar': await tarOf({ 'README.md': Buffer.from('no weights here') }),
    '/flaky.tar': await tarOf(files),
    // 96 MiB of zeros behind the model's files: about 100 KiB compressed, far past MAX_EXPANSION.
    '/bomb.tar.gz': gzipSync(await tarOf({ ...files, 'padding.bin': Buffer.alloc(96 * 1024 ** 2) })),
  };
  server = createServer((req, res) => {
    const url = req.url ?? '/';
    hits.set(url, (hits.get(url) ?? 0) + 1);
    if (url === '/redirect') {
      res.writeHead(302, { location: '/model.tar.gz' });
      return res.end();
    }
    if (url === '/private.tar' && req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401);
      return res.end('who are you');
    }
    const body = bodies[url];
    if (!body) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, { 'content-length': body.length });
    if (url === '/flaky.tar' && hits.get(url) === 1) {
      // The first download breaks halfway.
      res.write(body.subarray(0, body.length >> 1));
      setTimeout(() => res.socket?.destroy(), 20);
      return;
    }
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.close();
  await p.stop();
});

const v2 = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key, json });

async function registerModel(name: string): Promise<string> {
  const res = await v2('POST', '/models', { baseModelId: 'gantry/reference-byte-tiny', name, type: 'model' });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.id;
}
async function upload(modelId: string, path: string, token?: string) {
  const res = await v2('POST', '/models/uploads', {
    modelId,
    remoteUrl: `${origin}${path}`,
    ...(token ? { token } : {}),
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.status, 'REMOTE_UPLOAD_STATUS_PENDING');
  return eventually(
    () => v2('GET', `/models/uploads/${res.body.id}`).then((r) => r.body),
    (u) => u.status === 'REMOTE_UPLOAD_STATUS_SUCCEEDED' || u.status === 'REMOTE_UPLOAD_STATUS_FAILED',
    30_000,
  );
}
const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('remote model uploads', () => {
  test('a .tar.zst becomes a revision: files with their hashes, parameters counted, events in order', async () => {
    const modelId = await registerModel('imported');
    const u = await upload(modelId, '/model.tar.zst');
    assert.equal(u.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', u.statusMessage);
    assert.deepEqual(
      await searchedAsItEnded(p.temporal, `model-upload/${u.id}`, {
        type: 'modelUpload',
        label: 'succeeded-final-status',
      }),
      { status: 'REMOTE_UPLOAD_STATUS_SUCCEEDED', phase: 'done' },
      'operators find it by how it ended',
    );
    assert.match(u.revisionId, /^rv_/);
    assert.equal(u.restartCount, 0);
    assert.equal(u.maxRestarts, 3);

    const files = (await v2('GET', `/models/${modelId}/files`)).body;
    assert.equal(files.revisionId, u.revisionId);
    assert.deepEqual(
      files.data.map((f: { path: string; hash: string; sizeBytes: string }) => [f.path, f.hash, f.sizeBytes]),
      [
        ['config.json', sha(CONFIG), String(CONFIG.length)],
        ['model.safetensors', sha(WEIGHTS), String(WEIGHTS.length)],
      ],
    );
    assert.equal((await v2('GET', `/models/${modelId}`)).body.weights.parameters.total, '6');
    const revisions = (await v2('GET', `/models/${modelId}/revisions`)).body.data;
    assert.equal(revisions[0].validationStatus, 'REVISION_VALIDATION_STATUS_SUCCESS');

    const events = (await v2('GET', `/models/uploads/${u.id}/events`)).body.data;
    assert.deepEqual(
      events.map((e: { type: string }) => e.type),
      ['download.started', 'file.stored', 'file.stored', 'download.finished', 'revision.created', 'upload.succeeded'],
    );
    const page = (await v2('GET', `/models/uploads/${u.id}/events?limit=2`)).body;
    assert.equal(page.data.length, 2);
    const rest = (await v2('GET', `/models/uploads/${u.id}/events?after=${page.next_cursor}`)).body;
    assert.equal(rest.data.length, events.length - 2);

    const listed = (await v2('GET', '/models/uploads')).body.data;
    assert.ok(listed.some((x: { id: string }) => x.id === u.id));
  });

  test('.tar.gz through a redirect, and a bare .safetensors file', async () => {
    const a = await upload(await registerModel('from-gzip'), '/redirect');
    assert.equal(a.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', a.statusMessage);
    const b = await upload(await registerModel('bare-file'), '/weights.safetensors');
    assert.equal(b.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', b.statusMessage);
    const files = (await v2('GET', `/models/${b.modelId}/files`)).body.data;
    assert.deepEqual(
      files.map((f: { path: string }) => f.path),
      ['weights.safetensors'],
    );
  });

  test('a download that breaks is retried: restartCount 1, then succeeded', async () => {
    const u = await upload(await registerModel('flaky'), '/flaky.tar');
    assert.equal(u.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', u.statusMessage);
    assert.equal(u.restartCount, 1);
    assert.equal(hits.get('/flaky.tar'), 2);
    const events = (await v2('GET', `/models/uploads/${u.id}/events`)).body.data;
    const ids = events.map((e: { id: string }) => Number(e.id));
    assert.deepEqual(
      ids,
      [...ids].sort((a, b) => a - b),
      'events in the order they happened',
    );
    const types = events.map((e: { type: string }) => e.type);
    assert.equal(types[0], 'download.started');
    assert.ok(types.includes('download.restarted'));
    assert.deepEqual(types.slice(-5), [
      'file.stored',
      'file.stored',
      'download.finished',
      'revision.created',
      'upload.succeeded',
    ]);
  });

  test('a credential reaches the source and is never shown', async () => {
    const u = await upload(await registerModel('private'), '/private.tar', TOKEN);
    assert.equal(u.status, 'REMOTE_UPLOAD_STATUS_SUCCEEDED', u.statusMessage);
    assert.ok(!JSON.stringify(u).includes(TOKEN));
    const row = await p.db.query('SELECT sealed_token FROM registry_uploads WHERE id = $1', [u.id]);
    assert.ok(!row.rows[0].sealed_token.toString('latin1').includes(TOKEN), 'sealed at rest');
    const noToken = await upload(await registerModel('private-no-token'), '/private.tar');
    assert.equal(noToken.status, 'REMOTE_UPLOAD_STATUS_FAILED');
    assert.match(noToken.statusMessage, /HTTP 401/);
    assert.ok(!p.logs.text().includes(TOKEN), 'not in the logs');
  });

  test('unusable sources fail with a reason and are not retried', async () => {
    const evil = await upload(await registerModel('evil'), '/evil.tar');
    assert.equal(evil.status, 'REMOTE_UPLOAD_STATUS_FAILED');
    assert.deepEqual(await searchedAsItEnded(p.temporal, `model-upload/${evil.id}`), {
      status: 'REMOTE_UPLOAD_STATUS_FAILED',
      phase: 'failed',
    });
    assert.match(evil.statusMessage, /not a plain relative path/);
    assert.equal(evil.restartCount, 0);
    const notes = await upload(await registerModel('notes'), '/notes.tar');
    assert.equal(notes.status, 'REMOTE_UPLOAD_STATUS_FAILED');
    assert.match(notes.statusMessage, /no \.safetensors file/);
    const missing = await upload(await registerModel('missing'), '/nothing-here.tar');
    assert.match(missing.statusMessage, /HTTP 404/);
    assert.equal(missing.restartCount, 0);
  });

  test('a decompression bomb is refused, and the files stored before it are removed', async () => {
    const modelId = await registerModel('bomb');
    const bomb = await upload(modelId, '/bomb.tar.gz');
    assert.equal(bomb.status, 'REMOTE_UPLOAD_STATUS_FAILED');
    assert.match(bomb.statusMessage, new RegExp(`more than ${MAX_EXPANSION} times .* decompression bomb`));
    assert.equal(bomb.restartCount, 0);
    const dir = p.blobs.localPath(`registry/${modelId}`);
    const left = existsSync(dir)
      ? readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
      : [];
    assert.deepEqual(
      left.map((e) => e.name),
      [],
      'config.json and the weights, stored before the padding, are gone',
    );
  });

  test('bad requests: URL schemes, unknown models, strict bodies, other projects', async () => {
    const modelId = await registerModel('strict');
    for (const remoteUrl of [
      'file:///etc/passwd',
      'ftp://example.com/x.tar',
      'not a url',
      `http://user:pw@127.0.0.1/x`,
    ]) {
      const res = await v2('POST', '/models/uploads', { modelId, remoteUrl });
      assert.equal(res.status, 400, remoteUrl);
      assert.equal(res.body.error.param, 'remoteUrl');
    }
    const unknown = await v2('POST', '/models/uploads', { modelId: 'ml_nope', remoteUrl: `${origin}/model.tar.zst` });
    assert.equal(unknown.body.error.param, 'modelId');
    const extra = await v2('POST', '/models/uploads', { modelId, remoteUrl: `${origin}/x`, branch: 'main' });
    assert.equal(extra.body.error.param, 'branch');

    const stranger = await createTenant(p.db);
    const u = (await v2('GET', '/models/uploads')).body.data[0];
    assert.equal((await v2('GET', `/models/uploads/${u.id}`, undefined, stranger.key)).status, 404);
    const theirs = await call(p.baseUrl, 'GET', `/v2/projects/${stranger.projectId}/models/uploads/${u.id}`, {
      key: stranger.key,
    });
    assert.equal(theirs.status, 404);
  });

  test('by default only public hosts may be fetched', async () => {
    const policy = { allowPrivateHosts: false, maxBytes: 1 << 30 };
    for (const url of [
      'http://127.0.0.1/x',
      'http://10.1.2.3/x',
      'http://192.168.0.1/',
      'http://[::1]/',
      'http://169.254.169.254/latest',
      'http://localhost/x',
    ]) {
      await assert.rejects(checkRemoteUrl(url, policy), /private address/, url);
    }
    assert.equal((await checkRemoteUrl('http://93.184.215.14/x.tar', policy)).hostname, '93.184.215.14');
  });
});
