/**
 * The official TypeScript SDK (together-ai, pinned) against Gantry's files
 * routes, changing nothing but baseURL, apiKey and the SDK's own
 * TOGETHER_API_BASE_URL (its upload helper reads that variable when it is
 * first loaded, so the SDK is loaded after the platform has its address).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('official SDK: files', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-sdk-'));

  before(async () => {
    p = await startTestPlatform();
    tenant = await createTenant(p.db);
    process.env.TOGETHER_API_BASE_URL = `${p.baseUrl}/v1`;
    // require, not import(): the SDK's ESM build cannot upload (its node-unsafe-imports
    // uses `require`, which ESM lacks, so files.upload fails with "File does not exists").
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, maxRetries: 0 });
  });
  after(async () => {
    await p.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  let fileId = '';

  /**
   * together-ai 0.52.0 PUTs a fs.ReadStream through the global fetch without
   * `duplex: 'half'`, which Node's fetch (18+) refuses before sending anything
   * ("RequestInit: duplex option is required"), whatever the server. This shim
   * adds that one option for stream bodies; the SDK itself is untouched.
   */
  async function withStreamingFetch<T>(fn: () => Promise<T>): Promise<T> {
    const nodeFetch = globalThis.fetch;
    globalThis.fetch = (input, init) =>
      nodeFetch(
        input,
        init?.body && typeof (init.body as { pipe?: unknown }).pipe === 'function'
          ? ({ ...init, duplex: 'half' } as RequestInit)
          : init,
      );
    try {
      return await fn();
    } finally {
      globalThis.fetch = nodeFetch;
    }
  }

  test('files.upload: local check, POST /files, 302, PUT to the signed URL, retrieve', async () => {
    const file = path.join(dir, 'train.jsonl');
    writeFileSync(
      file,
      [
        {
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hello' },
          ],
        },
        {
          messages: [
            { role: 'user', content: 'bye' },
            { role: 'assistant', content: 'goodbye' },
          ],
        },
      ]
        .map((r) => JSON.stringify(r))
        .join('\n') + '\n',
    );
    const uploaded = await withStreamingFetch(() => client.files.upload(file, 'fine-tune'));
    assert.match(uploaded.id, /^file-/);
    assert.equal(uploaded.object, 'file');
    assert.equal(uploaded.purpose, 'fine-tune');
    assert.equal(uploaded.FileType, 'jsonl');
    fileId = uploaded.id;
  });

  test('files.retrieve shows the validation verdict; files.list includes the file', async () => {
    const done = await eventually(
      () => client.files.retrieve(fileId),
      (f) => f.processing_status === 'COMPLETED',
    );
    assert.equal(done.validation_report?.valid, true);
    assert.equal(done.validation_report?.nlines, 2);
    assert.equal(done.validation_report?.dataset_format, 'CONVERSATION');
    const list = await client.files.list();
    assert.ok(list.data.some((f) => f.id === fileId));
  });

  test('files.content returns the bytes; files.delete removes the file', async () => {
    const content = await (await client.files.content(fileId)).text();
    assert.match(content, /goodbye/);
    const deleted = await client.files.delete(fileId);
    assert.equal(deleted.id, fileId);
    assert.equal(deleted.deleted, true);
    await assert.rejects(client.files.retrieve(fileId), (err: { status?: number }) => err.status === 404);
  });
});
