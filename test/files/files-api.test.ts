/**
 * Files through the API: uploads (multipart and the SDKs' pre-signed flow),
 * the validation workflow's verdicts, content with Range, delete, limits and
 * project isolation, on real Temporal, PostgreSQL and blobs on disk.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { chat, filesUnder, jsonl } from '../helpers/datasets';
import { after, before, describe, test } from 'node:test';
import { acquireFileLease, releaseFileLease } from '../../db/files';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

function form(fields: Record<string, string>, content?: string | Buffer, fileField = 'file') {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  if (content !== undefined) f.append(fileField, new Blob([content]), 'upload.bin');
  return f;
}

describe('files', () => {
  let p: TestPlatform;
  let a: Tenant;
  let b: Tenant;

  before(async () => {
    p = await startTestPlatform({
      env: { GANTRY_MAX_UPLOAD_BYTES: String(64 * 1024), GANTRY_UPLOAD_URL_TTL_SECONDS: '5' },
    });
    a = await createTenant(p.db);
    b = await createTenant(p.db);
  });
  after(() => p.stop());

  const upload = (key: string, fields: Record<string, string>, content?: string | Buffer) =>
    call(p.baseUrl, 'POST', '/v1/files/upload', { key, body: form(fields, content) });
  const settled = (id: string, key = a.key) =>
    eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${id}`, { key }),
      (r) => r.status === 200 && ['COMPLETED', 'INVALID_FORMAT', 'FAILED'].includes(r.body.processing_status),
    );

  let validId = '';

  test('a valid fine-tuning file is validated: PENDING, QUEUED, RUNNING, COMPLETED, with its report', async () => {
    const content = jsonl(chat('hi', 'hello'), chat('2+2?', '4'), chat('capital of France?', 'Paris'));
    const res = await upload(a.key, { purpose: 'fine-tune', file_name: 'train.jsonl' }, content);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.id, /^file-/);
    assert.equal(res.body.object, 'file');
    assert.equal(res.body.filename, 'train.jsonl');
    assert.equal(res.body.bytes, Buffer.byteLength(content));
    assert.equal(res.body.purpose, 'fine-tune');
    assert.equal(res.body.FileType, 'jsonl');
    assert.equal(res.body.Processed, true);
    assert.equal(res.body.processing_status, 'PENDING');
    assert.equal(res.body.validation_report, undefined);
    validId = res.body.id;

    const done = await settled(validId);
    assert.equal(done.body.processing_status, 'COMPLETED');
    assert.deepEqual(done.body.validation_report, {
      valid: true,
      file_id: validId,
      nlines: 3,
      dataset_format: 'CONVERSATION',
      dataset_has_sample_weights: false,
      dataset_has_message_weights: false,
      dataset_is_multimodal: false,
      dataset_has_tools: false,
      dataset_has_parallel_tool_calls: false,
      dataset_has_reasoning: false,
    });
    const events = await call(p.baseUrl, 'GET', `/v1/files/${validId}/events`, { key: a.key });
    assert.deepEqual(
      events.body.data.map((e: any) => e.status),
      ['PENDING', 'QUEUED', 'RUNNING', 'COMPLETED'],
    );
    assert.equal(events.body.data.at(-1).message, 'Valid: 3 records.');
  });

  test('an invalid dataset ends INVALID_FORMAT with the line and the reason', async () => {
    const content = jsonl(chat('hi', 'hello'), {
      messages: [
        { role: 'user', content: 'q' },
        { role: 'user', content: 'again' },
      ],
    });
    const res = await upload(a.key, { purpose: 'fine-tune', file_name: 'bad.jsonl' }, content);
    const done = await settled(res.body.id);
    assert.equal(done.body.processing_status, 'INVALID_FORMAT');
    const r = done.body.validation_report;
    assert.equal(r.valid, false);
    assert.equal(r.error_type, 'INVALID_FORMAT');
    assert.match(r.error, /^Line 2: messages\[1\]\.role: two user messages in a row/);
    assert.equal(r.nlines, 1);
  });

  test('purposes that need no validation skip it and say so', async () => {
    const res = await upload(a.key, { purpose: 'batch-api', file_name: 'requests.jsonl' }, 'anything at all\n');
    const done = await settled(res.body.id);
    assert.equal(done.body.processing_status, 'COMPLETED');
    assert.equal(done.body.validation_report, undefined);
    assert.match(done.body.processing_note, /Validation skipped: files for purpose 'batch-api' are not validated/);
  });

  test('content streams back whole, or one byte range', async () => {
    const whole = await fetch(`${p.baseUrl}/v1/files/${validId}/content`, {
      headers: { authorization: `Bearer ${a.key}` },
    });
    assert.equal(whole.status, 200);
    const text = await whole.text();
    assert.match(text, /capital of France/);
    assert.equal(whole.headers.get('accept-ranges'), 'bytes');
    assert.match(whole.headers.get('content-disposition') ?? '', /^attachment; filename="?train\.jsonl"?$/);

    const part = await fetch(`${p.baseUrl}/v1/files/${validId}/content`, {
      headers: { authorization: `Bearer ${a.key}`, range: 'bytes=2-11' },
    });
    assert.equal(part.status, 206);
    assert.equal(await part.text(), text.slice(2, 12));
    assert.equal(part.headers.get('content-range'), `bytes 2-11/${Buffer.byteLength(text)}`);

    const beyond = await call(p.baseUrl, 'GET', `/v1/files/${validId}/content`, {
      key: a.key,
      headers: { range: 'bytes=999999-' },
    });
    assert.equal(beyond.status, 416);
    assert.equal(beyond.body.error.code, 'range_not_satisfiable');
  });

  test("another project's key gets 404 for the file, its content, events and delete", async () => {
    for (const [method, suffix] of [
      ['GET', ''],
      ['GET', '/content'],
      ['GET', '/events'],
      ['DELETE', ''],
    ]) {
      const res = await call(p.baseUrl, method, `/v1/files/${validId}${suffix}`, { key: b.key });
      assert.equal(res.status, 404, `${method} ${suffix}`);
      assert.equal(res.body.error.type, 'not_found_error');
    }
    const list = await call(p.baseUrl, 'GET', '/v1/files', { key: b.key });
    assert.deepEqual(list.body, { object: 'list', data: [], next_cursor: null });
  });

  test('file names are metadata: limits apply, and no name reaches the disk', async () => {
    const long = await upload(a.key, { purpose: 'eval', file_name: 'é'.repeat(65) + '.jsonl' }, '{}\n');
    assert.equal(long.status, 400);
    assert.equal(long.body.error.param, 'file_name');
    assert.match(long.body.error.message, /at most 128 bytes/);

    const nul = await upload(a.key, { purpose: 'eval', file_name: 'a\u0000b.jsonl' }, '{}\n');
    assert.equal(nul.status, 400);
    assert.match(nul.body.error.message, /NUL/);

    const sneaky = await upload(
      a.key,
      { purpose: 'eval', file_name: '../../../etc/passwd.jsonl', file_type: 'jsonl' },
      '{"x": 1}\n',
    );
    assert.equal(sneaky.status, 200);
    assert.equal(sneaky.body.filename, '../../../etc/passwd.jsonl');
    // The blob lands under the project's directory, named by the file id alone.
    assert.ok(existsSync(path.join(p.config.blobDir, 'files', a.projectId, sneaky.body.id)));
    assert.ok(!filesUnder(p.config.blobDir).some((f) => f.includes('passwd')));

    const untyped = await upload(a.key, { purpose: 'eval', file_name: 'data.txt' }, '{}\n');
    assert.equal(untyped.status, 400);
    assert.equal(untyped.body.error.param, 'file_type');
    // Refused uploads leave no blob behind.
    assert.equal(filesUnder(p.config.blobDir).filter((f) => f.includes('partial')).length, 0);
  });

  test('missing fields and files are 400s naming them', async () => {
    const noPurpose = await upload(a.key, { file_name: 'x.jsonl' }, '{}\n');
    assert.equal(noPurpose.status, 400);
    assert.equal(noPurpose.body.error.param, 'purpose');
    const noFile = await upload(a.key, { purpose: 'eval', file_name: 'x.jsonl' });
    assert.equal(noFile.status, 400);
    assert.equal(noFile.body.error.param, 'file');
    const json = await call(p.baseUrl, 'POST', '/v1/files/upload', { key: a.key, json: { purpose: 'eval' } });
    assert.equal(json.status, 400);
    assert.equal(json.body.error.code, 'unsupported_content_type');
  });

  test('an upload over the limit is 413 and leaves no row and no blob', async () => {
    const before = (await call(p.baseUrl, 'GET', '/v1/files', { key: a.key })).body.data.length;
    // This project's blobs only: other test files' workflows may still write to the shared store.
    const projectBlobs = () => filesUnder(path.join(p.config.blobDir, 'files', a.projectId)).length;
    const blobsBefore = projectBlobs();
    const res = await upload(a.key, { purpose: 'fine-tune', file_name: 'huge.jsonl' }, Buffer.alloc(100 * 1024, 0x61));
    assert.equal(res.status, 413);
    assert.equal(res.body.error.type, 'request_too_large');
    assert.equal((await call(p.baseUrl, 'GET', '/v1/files', { key: a.key })).body.data.length, before);
    // The 413 can go out while the refused stream winds down: its partial blob goes a moment later.
    await eventually(
      async () => projectBlobs(),
      (n) => n === blobsBefore,
      5_000,
    );
  });

  test('a file held by a running job cannot be deleted; once released it can, blob and all', async () => {
    await acquireFileLease(p.db, validId, 'fine-tune/ft-test-running');
    const refused = await call(p.baseUrl, 'DELETE', `/v1/files/${validId}`, { key: a.key });
    assert.equal(refused.status, 409);
    assert.match(refused.body.error.message, /in use by fine-tune\/ft-test-running/);
    await releaseFileLease(p.db, validId, 'fine-tune/ft-test-running');

    const blobCount = filesUnder(p.config.blobDir).length;
    const deleted = await call(p.baseUrl, 'DELETE', `/v1/files/${validId}`, { key: a.key });
    assert.equal(deleted.status, 200);
    assert.deepEqual(deleted.body, { id: validId, object: 'file', deleted: true });
    assert.equal((await call(p.baseUrl, 'GET', `/v1/files/${validId}`, { key: a.key })).status, 404);
    assert.equal(filesUnder(p.config.blobDir).length, blobCount - 1);
  });

  test('files are listed newest first', async () => {
    const list = await call(p.baseUrl, 'GET', '/v1/files', { key: a.key });
    const times = list.body.data.map((f: any) => f.created_at);
    assert.deepEqual(
      times,
      [...times].sort((x: number, y: number) => y - x),
    );
    assert.ok(list.body.data.length >= 3);
  });
});

describe("the official SDKs' pre-signed upload flow", () => {
  let p: TestPlatform;
  let a: Tenant;
  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_UPLOAD_URL_TTL_SECONDS: '5' } });
    a = await createTenant(p.db);
  });
  after(() => p.stop());

  const start = (fields: Record<string, string>) =>
    call(p.baseUrl, 'POST', '/v1/files', {
      key: a.key,
      body: new URLSearchParams(fields).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
  const put = (url: string, content: string | Buffer) => fetch(url, { method: 'PUT', body: content });

  test('302 to a signed URL; the PUT stores the bytes and validation runs', async () => {
    const res = await start({ file_name: '/home/me/data/train.jsonl', file_type: 'jsonl', purpose: 'fine-tune' });
    assert.equal(res.status, 302);
    const fileId = res.headers.get('x-together-file-id');
    const location = res.headers.get('location')!;
    assert.match(fileId ?? '', /^file-/);
    assert.ok(location.startsWith(`${p.baseUrl}/v1/files/${fileId}/upload?`));
    assert.match(location, /signature=[0-9a-f]{64}/);

    const pending = await call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key });
    assert.equal(pending.body.Processed, false);

    const content = jsonl({ prompt: 'Say hi', completion: 'hi' });
    const up = await put(location, content);
    assert.equal(up.status, 200);
    const done = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key }),
      (r) => r.body.processing_status === 'COMPLETED',
    );
    assert.equal(done.body.Processed, true);
    assert.equal(done.body.bytes, Buffer.byteLength(content));
    assert.equal(done.body.validation_report.dataset_format, 'INSTRUCTION');

    // The URL was single-use: a replay is refused and the file is unchanged.
    const replay = await put(location, 'something else\n');
    assert.equal(replay.status, 403);
    assert.equal(((await replay.json()) as any).error.code, 'upload_url_used');
    const content2 = await fetch(`${p.baseUrl}/v1/files/${fileId}/content`, {
      headers: { authorization: `Bearer ${a.key}` },
    });
    assert.equal(await content2.text(), content);
  });

  test('a tampered URL, another file id, or a size off the bound are refused', async () => {
    const res = await start({ file_name: 'x.jsonl', purpose: 'fine-tune', bytes: '10' });
    const location = res.headers.get('location')!;
    const url = new URL(location);

    const tampered = new URL(url);
    tampered.searchParams.set('max_bytes', '999999');
    const t = await put(tampered.toString(), '0123456789');
    assert.equal(t.status, 403);
    assert.equal(((await t.json()) as any).error.code, 'invalid_signature');

    const other = await start({ file_name: 'y.jsonl', purpose: 'fine-tune' });
    const swapped = new URL(
      location.replace(res.headers.get('x-together-file-id')!, other.headers.get('x-together-file-id')!),
    );
    assert.equal((await put(swapped.toString(), '0123456789')).status, 403);

    const over = await put(location, '01234567890');
    assert.equal(over.status, 413);
    const short = await put(location, '012345678');
    assert.equal(short.status, 400);
    assert.equal(((await short.json()) as any).error.code, 'size_mismatch');
  });

  test("the Python SDK's calls: fields in the query string, then POST /files/{id}/preprocess", async () => {
    const res = await call(p.baseUrl, 'POST', '/v1/files?purpose=fine-tune&file_name=py.jsonl', { key: a.key });
    assert.equal(res.status, 302);
    const fileId = res.headers.get('x-together-file-id')!;
    assert.equal((await put(res.headers.get('location')!, jsonl({ text: 'hello' }))).status, 200);
    const pre = await call(p.baseUrl, 'POST', `/v1/files/${fileId}/preprocess`, { key: a.key });
    assert.equal(pre.status, 200);
    assert.equal(pre.body.id, fileId);
    assert.equal(pre.body.filename, 'py.jsonl');
    assert.equal(pre.body.Processed, true);
  });

  test('one PUT takes any file the spec allows (25 GiB); a byte more is 413', async () => {
    const GiB = 1024 ** 3;
    const max = await start({ file_name: 'huge.jsonl', purpose: 'fine-tune', bytes: String(25 * GiB) });
    assert.equal(max.status, 302, JSON.stringify(max.body));
    const over = await start({ file_name: 'huge.jsonl', purpose: 'fine-tune', bytes: String(25 * GiB + 1) });
    assert.equal(over.status, 413);
    assert.equal(over.body.error.param, 'bytes');
  });

  test('the Python SDK 3.x: fields as a multipart form with the SHA-256; the same bytes again are 409 with their id', async () => {
    const content = jsonl({ text: 'the same bytes twice' });
    const checksum = createHash('sha256').update(content).digest('hex');
    const form = () => {
      const f = new FormData();
      f.append('purpose', 'fine-tune');
      f.append('file_name', 'twice.jsonl');
      f.append('file_type', 'jsonl');
      f.append('checksum', checksum);
      return f;
    };
    const first = await call(p.baseUrl, 'POST', '/v1/files', { key: a.key, body: form() });
    assert.equal(first.status, 302, JSON.stringify(first.body));
    const fileId = first.headers.get('x-together-file-id')!;
    assert.equal((await put(first.headers.get('location')!, content)).status, 200);

    const again = await call(p.baseUrl, 'POST', '/v1/files', { key: a.key, body: form() });
    assert.equal(again.status, 409);
    assert.equal(again.body.file_id, fileId, 'where the SDKs read it');
    assert.equal(again.body.error.code, 'file_exists');
    const multipart = await call(p.baseUrl, 'POST', '/v1/files/multipart/initiate', {
      key: a.key,
      json: { purpose: 'fine-tune', file_name: 'twice.jsonl', file_size: content.length, num_parts: 1, checksum },
    });
    assert.equal(multipart.status, 409);
    assert.equal(multipart.body.file_id, fileId);

    const bad = await call(p.baseUrl, 'POST', '/v1/files', {
      key: a.key,
      json: { purpose: 'fine-tune', file_name: 'x.jsonl', checksum: 'not-a-digest' },
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'checksum');
  });

  test('an upload that never arrives is discarded when its URL expires', async () => {
    const res = await start({ file_name: 'never.jsonl', purpose: 'fine-tune' });
    const fileId = res.headers.get('x-together-file-id')!;
    assert.equal((await call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key })).status, 200);
    await eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key }),
      (r) => r.status === 404,
      15_000,
    );
    const expired = await put(res.headers.get('location')!, '{}\n');
    assert.equal(expired.status, 403);
    assert.equal(((await expired.json()) as any).error.code, 'upload_url_expired');
    // The row goes a moment before the run closes (its last activity deletes it): wait for the run.
    const handle = p.temporal.workflow.getHandle(`file-validation/${fileId}`);
    await handle.result();
    const run = await handle.describe();
    assert.equal(run.status.name, 'COMPLETED');
  });
});
