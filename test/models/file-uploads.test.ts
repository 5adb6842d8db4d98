/**
 * Uploads of local weight files into the registry, at the API (the protocol the Python CLI's
 * `tg models upload` speaks; test/compat/python-model-files.test.ts drives the CLI itself): the
 * parts' ETags are their MD5s and a part that is not what the file's ETag promised is refused at
 * `complete`; input of every wrong shape is a 400 naming the field; other projects' models and
 * forged part URLs are refused; an upload not completed in time is discarded by its workflow with
 * every part it stored, and cannot be completed after.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { COMPLETING_LEASE_SECONDS } from '../../db/model-file-uploads';
import { modelFileUploadWorkflowId } from '../../shared/model-file-uploads';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { safetensorsFile } from '../helpers/archives';
import { recordHistoryIfAsked } from '../helpers/workflow-env';

/** Part URLs live 10 s, and an upload not completed 10 s after that is discarded. */
const TTL_SECONDS = 10;

let p: TestPlatform;
let t: Tenant;
let other: Tenant;
let modelId: string;

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

const models = (tenant: Tenant) => `/v2/projects/${tenant.projectId}/models`;

async function createUpload(files: Array<{ path: string; hash: string; numParts: number }>, tenant = t, id = modelId) {
  return call(p.baseUrl, 'POST', `${models(tenant)}/upload/create`, { key: tenant.key, json: { objectId: id, files } });
}

async function put(url: string, body: Buffer) {
  const res = await fetch(url, { method: 'PUT', body });
  return { status: res.status, etag: res.headers.get('etag'), body: await res.text() };
}

const complete = (uploadId: string, files: Array<{ path: string; hash: string; parts: string[] }>) =>
  call(p.baseUrl, 'POST', `${models(t)}/upload/complete`, {
    key: t.key,
    json: {
      objectId: modelId,
      files: files.map((f) => ({
        path: f.path,
        hash: f.hash,
        uploadDetails: { uploadId, parts: f.parts.map((hash, i) => ({ partNumber: i + 1, hash })) },
      })),
    },
  });

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_UPLOAD_URL_TTL_SECONDS: String(TTL_SECONDS) } });
  t = await createTenant(p.db, { projectRole: 'Admin' });
  other = await createTenant(p.db, { projectRole: 'Admin' });
  const created = await call(p.baseUrl, 'POST', models(t), {
    key: t.key,
    json: { name: 'uploaded', baseModelId: 'gantry/reference-byte-tiny', type: 'model' },
  });
  modelId = created.body.id;
});
after(() => p.stop());

describe('model file uploads', () => {
  test('parts are checked against the ETags: a part that is not what the file promised is refused; the right bytes make a revision', async () => {
    const weights = safetensorsFile({ fill: 1 });
    const plan = await createUpload([{ path: 'model.safetensors', hash: md5(weights), numParts: 1 }]);
    assert.equal(plan.status, 200, JSON.stringify(plan.body));
    assert.equal(plan.body.files[0].skipUpload, false);
    const url = plan.body.files[0].parts[0].url;

    // Other bytes than the file's ETag promised: the part is stored (its own ETag), the file is not.
    const wrong = await put(url, safetensorsFile({ fill: 2 }));
    assert.equal(wrong.status, 200, wrong.body);
    assert.equal(wrong.etag, `"${md5(safetensorsFile({ fill: 2 }))}"`);
    const refused = await complete(plan.body.uploadId, [
      { path: 'model.safetensors', hash: md5(weights), parts: [wrong.etag!] },
    ]);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'etag_mismatch');
    assert.equal(refused.body.error.param, 'files.0.hash');

    // The part sent again with the right bytes replaces the first attempt.
    const right = await put(url, weights);
    assert.equal(right.etag, `"${md5(weights)}"`);
    const stale = await complete(plan.body.uploadId, [
      { path: 'model.safetensors', hash: md5(weights), parts: [wrong.etag!] },
    ]);
    assert.equal(stale.body.error.param, 'files.0.uploadDetails.parts.0.hash');
    const done = await complete(plan.body.uploadId, [
      { path: 'model.safetensors', hash: md5(weights), parts: [right.etag!] },
    ]);
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.equal(done.body.revisionId, plan.body.revisionId);
    assert.equal(done.body.bytes, weights.length);
    const files = await call(p.baseUrl, 'GET', `${models(t)}/${modelId}/files`, { key: t.key });
    assert.equal(files.body.data[0].hash, `sha256:${createHash('sha256').update(weights).digest('hex')}`);

    const twice = await complete(plan.body.uploadId, [
      { path: 'model.safetensors', hash: md5(weights), parts: [right.etag!] },
    ]);
    assert.equal(twice.status, 409);
    assert.equal(twice.body.error.code, 'upload_not_open');
    const late = await put(url, weights);
    assert.equal(late.status, 409, late.body);

    const handle = p.temporal.workflow.getHandle(modelFileUploadWorkflowId(plan.body.uploadId));
    assert.equal(await handle.result(), 'COMPLETED');
    await recordHistoryIfAsked(handle, 'modelFileUpload', 'completed-after-a-refused-part');
  });

  test('a part sent several times at once leaves one blob', async () => {
    const weights = safetensorsFile({ fill: 3 });
    const plan = await createUpload([{ path: 'model.safetensors', hash: md5(weights), numParts: 1 }]);
    assert.equal(plan.status, 200, JSON.stringify(plan.body));
    const url = plan.body.files[0].parts[0].url;
    const answers = await Promise.all(Array.from({ length: 6 }, () => put(url, weights)));
    assert.deepEqual(
      answers.map((r) => r.status),
      Array(6).fill(200),
    );
    const dir = path.join(p.config.blobDir, 'model-uploads', plan.body.uploadId);
    const parts = readdirSync(dir, { recursive: true }).filter((f) => path.basename(String(f)).startsWith('part-'));
    assert.equal(parts.length, 1, 'the parts it replaced are deleted');
  });

  test('a complete whose API process died is taken over by the retry once its hold lapses', async () => {
    const weights = safetensorsFile({ fill: 3 });
    const plan = await createUpload([{ path: 'retried.safetensors', hash: md5(weights), numParts: 1 }]);
    const part = await put(plan.body.files[0].parts[0].url, weights);
    assert.equal(part.status, 200, part.body);
    const finish = () =>
      complete(plan.body.uploadId, [{ path: 'retried.safetensors', hash: md5(weights), parts: [part.etag!] }]);
    // What a `complete` leaves when its process dies mid-way: the upload completing, its hold renewed last at death.
    const diedAgo = (seconds: number) =>
      p.db.query(
        `UPDATE model_file_uploads SET state = 'completing', state_since = now() - make_interval(secs => $2) WHERE id = $1`,
        [plan.body.uploadId, seconds],
      );
    await diedAgo(5);
    const held = await finish();
    assert.equal(held.status, 409, 'a hold renewed 5 s ago may still be a live complete');
    assert.equal(held.body.error.code, 'upload_not_open');
    await diedAgo(COMPLETING_LEASE_SECONDS + 5);
    const retried = await finish();
    assert.equal(retried.status, 200, JSON.stringify(retried.body));
    assert.equal(retried.body.revisionId, plan.body.revisionId);
    assert.equal(retried.body.bytes, weights.length);
  });

  test('input of any wrong shape is a 400 naming the field; other projects and forged URLs are refused', async () => {
    const ok = { path: 'model.safetensors', hash: md5(safetensorsFile({ fill: 1 })), numParts: 1 };
    const cases: Array<[unknown[], string]> = [
      [[{ ...ok, path: '../escape.bin' }], 'files.0.path'],
      [[{ ...ok, path: '.hidden' }], 'files.0.path'],
      [[ok, ok], 'files.1.path'],
      [[{ ...ok, numParts: 3 }], 'files.0.hash'],
      [[{ ...ok, hash: `${ok.hash}-2` }], 'files.0.hash'],
      [[{ ...ok, hash: 'not-an-etag' }], 'files.0.hash'],
      [[{ ...ok, numParts: 0 }], 'files.0.numParts'],
      [[], 'files'],
    ];
    for (const [files, param] of cases) {
      const r = await createUpload(files as never);
      assert.equal(r.status, 400, `${JSON.stringify(files)}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.error.param, param, JSON.stringify(r.body));
    }
    const strange = await call(p.baseUrl, 'POST', `${models(t)}/upload/create`, {
      key: t.key,
      json: { objectId: modelId, files: [ok], extra: 1 },
    });
    assert.equal(strange.status, 400);

    // Another project's model is not found, to upload into or to download from.
    assert.equal((await createUpload([ok], other)).status, 404);
    const download = await call(p.baseUrl, 'POST', `${models(other)}/download`, {
      key: other.key,
      json: { objectId: modelId, paths: [] },
    });
    assert.equal(download.status, 404);
    const missingFile = await call(p.baseUrl, 'POST', `${models(t)}/download`, {
      key: t.key,
      json: { objectId: modelId, paths: ['nope.bin'] },
    });
    assert.equal(missingFile.status, 404);
    assert.equal(missingFile.body.error.code, 'file_not_found');

    // A part URL whose signature does not match what it names.
    const plan = await createUpload([ok]);
    const forged = new URL(plan.body.files[0].parts[0].url);
    forged.searchParams.set('max_bytes', String(10 * 1024 ** 4));
    const r = await put(forged.toString(), safetensorsFile({ fill: 1 }));
    assert.equal(r.status, 403, r.body);
    assert.match(r.body, /invalid_signature/);
    // ... and a download URL of a file, pointed at another.
    const plannedDownload = await call(p.baseUrl, 'POST', `${models(t)}/download`, {
      key: t.key,
      json: { objectId: modelId },
    });
    const fileUrl = new URL(plannedDownload.body.files[0].parts[0].url);
    fileUrl.pathname = fileUrl.pathname.replace(/\/files\/0$/, '/files/1');
    assert.equal((await fetch(fileUrl)).status, 403);
  });

  test('an upload not completed in time is discarded with every part it stored, and cannot be completed after', async () => {
    const weights = safetensorsFile({ fill: 3 });
    const plan = await createUpload([
      { path: 'a.safetensors', hash: md5(weights), numParts: 1 },
      { path: 'b.safetensors', hash: md5(weights), numParts: 1 },
    ]);
    const sent = await put(plan.body.files[0].parts[0].url, weights);
    assert.equal(sent.status, 200, sent.body);
    const { rows } = await p.db.query('SELECT blob_key FROM model_file_upload_parts WHERE upload_id = $1', [
      plan.body.uploadId,
    ]);
    assert.equal(rows.length, 1);
    assert.equal(await p.blobs.size(rows[0].blob_key), weights.length);

    const handle = p.temporal.workflow.getHandle(modelFileUploadWorkflowId(plan.body.uploadId));
    assert.equal(await handle.result(), 'DISCARDED');
    assert.equal(await p.blobs.size(rows[0].blob_key), null);
    const state = await p.db.query('SELECT state FROM model_file_uploads WHERE id = $1', [plan.body.uploadId]);
    assert.equal(state.rows[0].state, 'expired');
    const late = await complete(plan.body.uploadId, [
      { path: 'a.safetensors', hash: md5(weights), parts: [sent.etag!] },
      { path: 'b.safetensors', hash: md5(weights), parts: [sent.etag!] },
    ]);
    assert.equal(late.status, 409, JSON.stringify(late.body));
    assert.match(late.body.error.message, /is expired; only an open upload can be completed/);
    await eventually(
      async () => (await handle.describe()).status.name,
      (s) => s === 'COMPLETED',
    );
    await recordHistoryIfAsked(handle, 'modelFileUpload', 'discarded-when-time-ran-out');
  });
});
