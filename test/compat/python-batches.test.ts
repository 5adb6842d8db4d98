/**
 * Batches with the official Python CLI (`together batches submit|list|get|cancel|download`) and
 * SDK (`client.batches`), PyPI `together` pinned, against a real stack and a dedicated endpoint of
 * the reference byte model.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { pythonSdk, together, togetherJson, type PythonClient } from '../helpers/python-sdk';
import { readyReferenceEndpoint, uploadBatchInput } from '../helpers/reference-endpoint';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('official Python CLI and SDK: batches', () => {
  let p: TestPlatform;
  let t: Tenant;
  let cli: PythonClient;
  let model: string;
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-py-batches-'));
  const request = (i: number) => ({
    custom_id: `q-${i}`,
    body: { model, messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 4 },
  });
  const ended = (id: string) =>
    eventually(
      () => call(p.baseUrl, 'GET', `/v1/batches/${id}`, { key: t.key }),
      (r) => ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'].includes(r.body.status),
      60_000,
    );

  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_BATCH_CONCURRENCY_PER_PROJECT: '1' } });
    t = await createTenant(p.db);
    cli = { baseUrl: p.baseUrl, key: t.key, cwd: dir };
    model = await readyReferenceEndpoint(p, t, 'py-batches');
  });
  after(() => p.stop());

  test('CLI: submit a local file, list, get, download output and errors', async () => {
    const lines = [
      request(0),
      request(1),
      { ...request(2), body: { ...request(2).body, model: `${t.projectSlug}/nope` } },
    ];
    writeFileSync(path.join(dir, 'requests.jsonl'), lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const submitted = await togetherJson(cli, 'batches', 'submit', './requests.jsonl', 'chat.completions');
    const id: string = submitted.job.id;
    assert.equal(submitted.job.endpoint, '/v1/chat/completions');
    const listed = await togetherJson(cli, 'batches', 'list');
    assert.ok(listed.some((b: { id: string }) => b.id === id));
    await ended(id);
    const got = await togetherJson(cli, 'batches', 'get', id);
    assert.equal(got.status, 'COMPLETED');
    assert.equal(got.progress, 100);

    const saved = await togetherJson(cli, 'batches', 'download', id, '--output', path.join(dir, 'out.jsonl'));
    assert.deepEqual(
      saved.files.map((f: { kind: string }) => f.kind),
      ['output', 'error'],
    );
    const read = (file: string) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    assert.deepEqual(
      read(path.join(dir, 'out.jsonl')).map((o) => o.custom_id),
      ['q-0', 'q-1'],
    );
    assert.deepEqual(
      read(path.join(dir, 'out.errors.jsonl')).map((o) => [o.custom_id, o.response.status_code]),
      [['q-2', 404]],
    );
    // Without --output, the output goes to stdout.
    const printed = await together(cli, 'batches', 'download', id);
    assert.equal(printed.trim().split('\n').length, 2);
  });

  test('CLI cancel; SDK create, retrieve, list, cancel', async () => {
    const input = await uploadBatchInput(
      p,
      t.key,
      Array.from({ length: 1000 }, (_, i) => request(i)),
    );
    const viaSdk = await pythonSdk(
      cli,
      `
import json
from together import Together
client = Together()
created = client.batches.create(endpoint="/v1/chat/completions", input_file_id=${JSON.stringify(input)}, completion_window="1h")
job = client.batches.retrieve(created.job.id)
listed = [b.id for b in client.batches.list()]
cancelled = client.batches.cancel(job.id)
print(json.dumps({"id": job.id, "status": created.job.status, "input": job.input_file_id,
                  "deadline": job.job_deadline.isoformat(), "listed": job.id in listed, "after_cancel": cancelled.status}))
`,
    );
    assert.equal(viaSdk.status, 'VALIDATING');
    assert.equal(viaSdk.input, input);
    assert.ok(viaSdk.listed);
    assert.ok(viaSdk.deadline);
    assert.equal((await ended(viaSdk.id)).body.status, 'CANCELLED');

    const submitted = await togetherJson(cli, 'batches', 'submit', input, 'chat.completions');
    await together(cli, 'batches', 'cancel', submitted.job.id);
    assert.equal((await ended(submitted.job.id)).body.status, 'CANCELLED');
  });
});
