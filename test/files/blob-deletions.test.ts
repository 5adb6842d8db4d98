/**
 * A file's blobs go when the file goes, even when storage refuses the delete at that moment (the
 * control worker's blob deletion rounds finish it), and parts sent again at once leave one blob
 * (files' multipart parts and storage objects' parts here; model files' in
 * test/models/file-uploads.test.ts).
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { BlobStore } from '../../providers/storage/blob-store';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const PART = 1024;

/** The platform's blob store, whose deletes fail while `refusing` is set (a storage outage). */
function refusingDeletes(store: BlobStore) {
  const state = { refusing: false, refused: 0 };
  const wrapped: BlobStore = {
    put: (key, body, opts) => store.put(key, body, opts),
    read: (key, range, opts) => store.read(key, range, opts),
    size: (key) => store.size(key),
    localPath: (key) => store.localPath(key),
    async delete(key) {
      if (state.refusing) {
        state.refused++;
        throw new Error('injected: storage refuses deletes');
      }
      return store.delete(key);
    },
  };
  return { state, wrapped };
}

describe('blob deletions', () => {
  let p: TestPlatform;
  let a: Tenant;
  let storage: ReturnType<typeof refusingDeletes>['state'];
  before(async () => {
    p = await startTestPlatform({
      env: {
        GANTRY_MULTIPART_PART_BYTES: String(PART),
        GANTRY_MAX_SINGLE_PUT_BYTES: String(2 * PART),
        GANTRY_UPLOAD_URL_TTL_SECONDS: '5',
        GANTRY_BLOB_DELETION_RETRY_SECONDS: '1',
      },
      wrapBlobs: (store) => {
        const r = refusingDeletes(store);
        storage = r.state;
        return r.wrapped;
      },
    });
    a = await createTenant(p.db);
  });
  after(() => p.stop());

  /** Blob files under a directory of the store, by name (the store writes each blob as one file). */
  const blobFiles = (dir: string, match: (name: string) => boolean) => {
    const full = path.join(p.config.blobDir, dir);
    return existsSync(full) ? readdirSync(full, { recursive: true }).map(String).filter(match) : [];
  };
  const partsOf = (fileId: string) => blobFiles(path.join('uploads', fileId), (f) => f.startsWith('part-'));
  const initiate = (body: object) =>
    call(p.baseUrl, 'POST', '/v1/files/multipart/initiate', { key: a.key, json: body });
  const putPart = (url: string, bytes: Buffer) => fetch(url, { method: 'PUT', body: bytes });

  test('an upload discarded while storage refuses deletes leaves no part behind once storage is back', async () => {
    const init = await initiate({ file_name: 'stale.jsonl', purpose: 'fine-tune', file_size: 2 * PART });
    assert.equal(init.status, 200);
    const fileId = init.body.file_id as string;
    assert.equal((await putPart(init.body.parts[0].url, Buffer.alloc(PART, 0x61))).status, 200);
    storage.refusing = true;
    const refusedBefore = storage.refused;
    try {
      // The workflow's timer discards the upload: the file is gone for its owner, the run ends.
      const handle = p.temporal.workflow.getHandle(`file-validation/${fileId}`);
      await handle.result();
      assert.equal((await handle.describe()).status.name, 'COMPLETED');
      const res = await call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key });
      assert.equal(res.status, 404);
      // Storage refused: the part is still on disk, and the retry rounds keep failing on it.
      await eventually(
        () => Promise.resolve(storage.refused),
        (n) => n >= refusedBefore + 3,
        20_000,
      );
      assert.equal(partsOf(fileId).length, 1);
    } finally {
      storage.refusing = false;
    }
    await eventually(
      () => Promise.resolve(partsOf(fileId).length),
      (n) => n === 0,
      20_000,
    );
  });

  test('a file deleted while storage refuses deletes is gone at once, and its bytes once storage is back', async () => {
    const form = new FormData();
    form.append('file', new Blob([Buffer.from('{"text": "one"}\n{"text": "two"}\n')]), 'small.jsonl');
    form.append('file_name', 'small.jsonl');
    form.append('purpose', 'eval');
    const up = await fetch(`${p.baseUrl}/v1/files/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.key}` },
      body: form,
    });
    assert.equal(up.status, 200);
    const fileId = ((await up.json()) as { id: string }).id;
    const stored = () => blobFiles('files', (f) => f.endsWith(fileId)).length;
    assert.equal(stored(), 1);
    storage.refusing = true;
    try {
      const del = await call(p.baseUrl, 'DELETE', `/v1/files/${fileId}`, { key: a.key });
      assert.equal(del.status, 200);
      assert.equal(del.body.deleted, true);
      assert.equal((await call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key })).status, 404);
      assert.equal(stored(), 1, 'storage refused the delete');
    } finally {
      storage.refusing = false;
    }
    await eventually(
      () => Promise.resolve(stored()),
      (n) => n === 0,
      20_000,
    );
  });

  test('a part sent several times at once leaves one blob, the one complete joins', async () => {
    const init = await initiate({ file_name: 'racing.jsonl', purpose: 'eval', file_size: PART });
    assert.equal(init.status, 200);
    const fileId = init.body.file_id as string;
    const line = (i: number) => `${JSON.stringify({ text: `attempt ${i}` })}\n`;
    const attempt = (i: number) => Buffer.from(line(i).repeat(Math.ceil(PART / line(i).length))).subarray(0, PART);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => putPart(init.body.parts[0].url, attempt(i))));
    assert.deepEqual(
      answers.map((r) => r.status),
      Array(6).fill(200),
    );
    const etags = await Promise.all(answers.map(async (r) => ((await r.json()) as { etag: string }).etag));
    assert.equal(partsOf(fileId).length, 1, 'the parts it replaced are deleted');
    // Exactly one attempt is the part the upload holds: complete accepts its ETag only.
    const outcomes = [];
    for (const etag of etags) {
      const r = await call(p.baseUrl, 'POST', '/v1/files/multipart/complete', {
        key: a.key,
        json: { upload_id: init.body.upload_id, parts: [{ part_number: 1, etag }] },
      });
      outcomes.push(r.status);
      if (r.status === 200) break;
      assert.equal(r.body.error.code, 'etag_mismatch');
    }
    assert.equal(outcomes.at(-1), 200);
    assert.equal(partsOf(fileId).length, 0, 'complete deletes the parts it joined');
  });

  test('a file deleted, aborted and completed at once: one of them wins, none fails, nothing stays on disk', async () => {
    for (let round = 0; round < 12; round++) {
      const init = await initiate({ file_name: `contended-${round}.jsonl`, purpose: 'eval', file_size: PART });
      assert.equal(init.status, 200);
      const fileId = init.body.file_id as string;
      const bytes = Buffer.from('{"text": "x"}\n'.repeat(PART)).subarray(0, PART);
      const sent = await putPart(init.body.parts[0].url, bytes);
      const etag = ((await sent.json()) as { etag: string }).etag;
      const [deleted, aborted, completed] = await Promise.all([
        call(p.baseUrl, 'DELETE', `/v1/files/${fileId}`, { key: a.key }),
        call(p.baseUrl, 'POST', '/v1/files/multipart/abort', { key: a.key, json: { upload_id: init.body.upload_id } }),
        call(p.baseUrl, 'POST', '/v1/files/multipart/complete', {
          key: a.key,
          json: { upload_id: init.body.upload_id, parts: [{ part_number: 1, etag }] },
        }),
      ]);
      const outcome = `delete ${deleted.status}, abort ${aborted.status}, complete ${completed.status}`;
      assert.ok([200, 404].includes(deleted.status), outcome);
      assert.ok([200, 404, 409].includes(aborted.status), outcome);
      assert.ok([200, 404, 409].includes(completed.status), outcome);
      // Whoever won, a delete or abort that answered 200 left nothing, and a complete alone kept the file.
      const kept = (await call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: a.key })).status === 200;
      assert.equal(kept, deleted.status === 404 && aborted.status !== 200 && completed.status === 200, outcome);
      await eventually(
        () =>
          Promise.resolve(partsOf(fileId).length + (kept ? 0 : blobFiles('files', (f) => f.endsWith(fileId)).length)),
        (n) => n === 0,
        20_000,
      );
      if (kept) assert.equal((await call(p.baseUrl, 'DELETE', `/v1/files/${fileId}`, { key: a.key })).status, 200);
    }
  });

  test("a storage object's part sent several times at once leaves one blob", async () => {
    const init = await call(p.baseUrl, 'POST', '/v1/storage/multipart/init', {
      key: a.key,
      json: { filename: 'vol/0/racing.bin', parts_count: 1 },
    });
    assert.equal(init.status, 200, JSON.stringify(init.body));
    const url = init.body.part_upload_urls[0].url as string;
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => fetch(url, { method: 'PUT', body: Buffer.alloc(PART, 0x30 + i) })),
    );
    assert.deepEqual(
      answers.map((r) => r.status),
      Array(6).fill(200),
    );
    const parts = blobFiles(path.join('storage', a.projectId, init.body.upload_id as string), (f) =>
      f.startsWith('part-'),
    );
    assert.equal(parts.length, 1, 'the parts it replaced are deleted');
  });
});
