/** Multipart uploads: parts on signed URLs in any order, complete, abort, and the timer that discards the rest. */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const PART = 1024;

function dataset(bytes: number): Buffer {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const line = JSON.stringify({
      prompt: `Count to ${i}.`,
      completion: Array.from({ length: 5 }, (_, k) => k + i).join(' '),
    });
    lines.push(line);
    size += line.length + 1;
  }
  return Buffer.from(lines.join('\n') + '\n');
}

describe('multipart uploads', () => {
  let p: TestPlatform;
  let a: Tenant;
  let b: Tenant;
  before(async () => {
    p = await startTestPlatform({
      env: {
        GANTRY_MULTIPART_PART_BYTES: String(PART),
        GANTRY_MAX_SINGLE_PUT_BYTES: String(2 * PART),
        GANTRY_UPLOAD_URL_TTL_SECONDS: '5',
      },
    });
    a = await createTenant(p.db);
    b = await createTenant(p.db);
  });
  after(() => p.stop());

  const initiate = (key: string, body: object) =>
    call(p.baseUrl, 'POST', '/v1/files/multipart/initiate', { key, json: body });
  const putPart = (url: string, bytes: Buffer) => fetch(url, { method: 'PUT', body: bytes });
  const partFiles = () => {
    const dir = path.join(p.config.blobDir, 'uploads');
    return existsSync(dir) ? readdirSync(dir, { recursive: true }).filter((f) => String(f).includes('part-')) : [];
  };

  test('files above the single-PUT limit are sent to the multipart flow', async () => {
    const res = await call(p.baseUrl, 'POST', '/v1/files', {
      key: a.key,
      json: { file_name: 'big.jsonl', purpose: 'fine-tune', bytes: 3 * PART },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.error.code, 'use_multipart');
    assert.match(res.body.error.message, /POST \/v1\/files\/multipart\/initiate/);
  });

  test('parts in any order, a retried part, complete: the file is joined, checked and validated', async () => {
    const content = dataset(2.5 * PART);
    const init = await initiate(a.key, { file_name: 'big.jsonl', purpose: 'fine-tune', file_size: content.length });
    assert.equal(init.status, 200, JSON.stringify(init.body));
    const up = init.body;
    assert.equal(up.part_size, PART);
    assert.equal(up.part_count, 3);
    assert.deepEqual(
      up.parts.map((x: any) => x.size),
      [PART, PART, content.length - 2 * PART],
    );

    const slice = (n: number) => content.subarray((n - 1) * PART, Math.min(n * PART, content.length));
    const etags: Record<number, string> = {};
    for (const n of [3, 1, 2, 1]) {
      const res = await putPart(up.parts[n - 1].url, slice(n));
      assert.equal(res.status, 200);
      etags[n] = ((await res.json()) as any).etag;
    }
    const wrongSize = await putPart(up.parts[0].url, slice(1).subarray(1));
    assert.equal(wrongSize.status, 400);
    assert.ok(partFiles().length >= 3, 'the three parts are on disk before the join');

    const badEtag = await call(p.baseUrl, 'POST', '/v1/files/multipart/complete', {
      key: a.key,
      json: {
        upload_id: up.upload_id,
        parts: [1, 2, 3].map((n) => ({ part_number: n, etag: n === 2 ? 'f00' : etags[n] })),
      },
    });
    assert.equal(badEtag.status, 400);
    assert.equal(badEtag.body.error.param, 'parts.1.etag');

    const elsewhere = await call(p.baseUrl, 'POST', '/v1/files/multipart/complete', {
      key: b.key,
      json: { upload_id: up.upload_id, parts: [1, 2, 3].map((n) => ({ part_number: n, etag: etags[n] })) },
    });
    assert.equal(elsewhere.status, 404);

    const done = await call(p.baseUrl, 'POST', '/v1/files/multipart/complete', {
      key: a.key,
      json: { upload_id: up.upload_id, parts: [1, 2, 3].map((n) => ({ part_number: n, etag: `"${etags[n]}"` })) },
    });
    assert.equal(done.status, 200, JSON.stringify(done.body));
    assert.equal(done.body.id, up.file_id);
    assert.equal(done.body.bytes, content.length);

    const validated = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${up.file_id}`, { key: a.key }),
      (r) => r.body.processing_status === 'COMPLETED',
    );
    assert.equal(validated.body.validation_report.dataset_format, 'INSTRUCTION');
    const bytes = Buffer.from(
      await (
        await fetch(`${p.baseUrl}/v1/files/${up.file_id}/content`, { headers: { authorization: `Bearer ${a.key}` } })
      ).arrayBuffer(),
    );
    assert.ok(bytes.equals(content), 'the joined file equals the original');
    assert.equal(partFiles().length, 0, 'parts are removed once joined');

    const late = await putPart(up.parts[0].url, slice(1));
    assert.equal(late.status, 409);
    const again = await call(p.baseUrl, 'POST', '/v1/files/multipart/complete', {
      key: a.key,
      json: { upload_id: up.upload_id, parts: [1, 2, 3].map((n) => ({ part_number: n, etag: etags[n] })) },
    });
    assert.equal(again.status, 409);
  });

  test('a tampered part URL is refused', async () => {
    const init = await initiate(a.key, { file_name: 'x.jsonl', purpose: 'fine-tune', file_size: 2 * PART });
    const url = new URL(init.body.parts[0].url);
    url.pathname = url.pathname.replace('/parts/1', '/parts/2');
    const res = await putPart(url.toString(), Buffer.alloc(PART));
    assert.equal(res.status, 403);
  });

  test('abort discards the parts and the file', async () => {
    const init = await initiate(a.key, { file_name: 'gone.jsonl', purpose: 'fine-tune', file_size: 2 * PART });
    assert.equal((await putPart(init.body.parts[0].url, Buffer.alloc(PART, 0x61))).status, 200);
    assert.ok(partFiles().length >= 1);
    const res = await call(p.baseUrl, 'POST', '/v1/files/multipart/abort', {
      key: a.key,
      json: { upload_id: init.body.upload_id },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.aborted, true);
    assert.equal((await call(p.baseUrl, 'GET', `/v1/files/${init.body.file_id}`, { key: a.key })).status, 404);
    assert.equal(partFiles().length, 0);
  });

  test('deleting a file mid-upload removes the parts it had received', async () => {
    const init = await initiate(a.key, { file_name: 'dropped.jsonl', purpose: 'fine-tune', file_size: 2 * PART });
    assert.equal((await putPart(init.body.parts[0].url, Buffer.alloc(PART, 0x63))).status, 200);
    assert.ok(partFiles().length >= 1);
    const res = await call(p.baseUrl, 'DELETE', `/v1/files/${init.body.file_id}`, { key: a.key });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(partFiles(), [], 'no part is left on disk');
    // A part arriving after the delete is refused, and leaves nothing behind either.
    assert.notEqual((await putPart(init.body.parts[1].url, Buffer.alloc(PART, 0x64))).status, 200);
    assert.deepEqual(partFiles(), []);
  });

  test('parts of an upload that is never completed are discarded by the workflow timer', async () => {
    const init = await initiate(a.key, { file_name: 'stale.jsonl', purpose: 'fine-tune', file_size: 2 * PART });
    assert.equal((await putPart(init.body.parts[0].url, Buffer.alloc(PART, 0x62))).status, 200);
    assert.ok(partFiles().length >= 1, 'the part is on disk');
    await eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${init.body.file_id}`, { key: a.key }),
      (r) => r.status === 404,
      20_000,
    );
    // The row goes a moment before the parts and the run closes (its last activity deletes the row,
    // then the parts): wait for the run.
    const handle = p.temporal.workflow.getHandle(`file-validation/${init.body.file_id}`);
    await handle.result();
    const run = await handle.describe();
    assert.equal(run.status.name, 'COMPLETED');
    assert.equal(partFiles().length, 0);
  });
});
