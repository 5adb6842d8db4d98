/**
 * Failures a user never sees the inside of: an upload cut off mid-stream
 * leaves no row and no blob; a blob that cannot be read for a moment (a
 * storage hiccup) makes the validating activity retry, not fail.
 */
import assert from 'node:assert/strict';
import { renameSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { chat, filesUnder, jsonl } from '../helpers/datasets';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('upload and validation failures', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  const workers: StartedProcess[] = [];

  before(async () => {
    p = await startTestPlatform({ controlWorker: false });
    tenant = await createTenant(p.db);
  });
  after(async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    await p.stop();
  });

  test('an upload cut off mid-stream leaves no row and no blob', async () => {
    // Only this project's blobs: other test files share the store.
    const projectBlobs = () => filesUnder(path.join(p.config.blobDir, 'files', tenant.projectId));
    const boundary = 'cut-off-boundary';
    const url = new URL(`${p.baseUrl}/v1/files/upload`);
    const head =
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nfine-tune\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file_name"\r\n\r\ncut.jsonl\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.jsonl"\r\n\r\n`;
    let sawPartialBlob = false;
    await new Promise<void>((resolve) => {
      const req = http.request(url, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${tenant.key}`,
          'content-type': `multipart/form-data; boundary=${boundary}`,
          'content-length': 10 * 1024 * 1024, // promised, never delivered
        },
      });
      req.on('error', () => resolve());
      req.on('response', () => resolve());
      req.write(head);
      req.write(Buffer.alloc(256 * 1024, 0x61));
      // Once the server is visibly writing the blob, the client disappears.
      eventually(
        async () => projectBlobs().some((f) => f.includes('.partial-')),
        (seen) => seen,
        10_000,
      ).then(
        () => {
          sawPartialBlob = true;
          req.destroy();
        },
        () => req.destroy(),
      );
    });
    assert.ok(sawPartialBlob, 'the server had started writing the upload');
    await eventually(
      async () => projectBlobs().length,
      (n) => n === 0,
      5_000,
    );
    const list = await call(p.baseUrl, 'GET', '/v1/files', { key: tenant.key });
    assert.deepEqual(list.body.data, []);
    // A client that hangs up is not a server failure: no 500 is logged for it.
    const serverErrors = p.logs
      .text()
      .split('\n')
      .filter((l) => l.includes('"msg":"request failed"') && l.includes('/v1/files/upload'));
    assert.deepEqual(serverErrors, []);
  });

  test('a blob unreadable for a while is retried until validation succeeds', async () => {
    const upload = new FormData();
    upload.append('purpose', 'fine-tune');
    upload.append('file_name', 'hiccup.jsonl');
    upload.append('file', new Blob([jsonl(chat('hi', 'hello'))]), 'hiccup.jsonl');
    const res = await call(p.baseUrl, 'POST', '/v1/files/upload', { key: tenant.key, body: upload });
    assert.equal(res.status, 200);
    const fileId = res.body.id;
    // Storage "goes away" before any worker reads the file...
    const [blob] = filesUnder(p.config.blobDir).filter((f) => f.endsWith(fileId));
    renameSync(blob, `${blob}.away`);

    const worker = startProcess('workers/control.ts', {});
    workers.push(worker);
    await worker.waitFor(/control worker polling/);
    const handle = p.temporal.workflow.getHandle(`file-validation/${fileId}`);
    // ...the activity fails and Temporal schedules another attempt...
    const pending = await eventually(
      async () => (await handle.describe()).raw.pendingActivities?.[0],
      (a) => Number(a?.attempt ?? 0) >= 2,
      30_000,
    );
    assert.match(String(pending?.lastFailure?.message), /ENOENT/);
    // ...and once storage is back, the next attempt validates the file.
    renameSync(`${blob}.away`, blob);
    const done = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: tenant.key }),
      (r) => r.body.processing_status === 'COMPLETED',
      60_000,
    );
    assert.equal(done.body.validation_report.valid, true);
    worker.child.kill('SIGTERM');
    await worker.exited;
  });
});
