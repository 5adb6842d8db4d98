/**
 * Batches through the official npm SDK (together-ai, client.batches) against a real stack and a
 * dedicated endpoint of the reference byte model: a batch runs every line once and writes its
 * output in input order (a line the gateway refuses goes to the error file); a bad input fails
 * before any call, naming the line; cancel and the completion window end a batch with the lines
 * answered so far; the files are removed after the retention.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { modelServerRequests, readyReferenceEndpoint, uploadBatchInput } from '../helpers/reference-endpoint';
import { createTenant, type Tenant } from '../helpers/tenants';

const ENDED = ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'];

describe('official SDK: batches', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;
  let model: string;

  before(async () => {
    p = await startTestPlatform({
      // One line at a time: cancel and expiry meet a batch that is still running. Files kept ~9 s.
      env: { GANTRY_BATCH_CONCURRENCY_PER_PROJECT: '1', GANTRY_BATCH_RETENTION_DAYS: '0.0001' },
    });
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, maxRetries: 0 });
    model = await readyReferenceEndpoint(p, tenant, 'batches');
  });
  after(() => p.stop());

  const chat = (i: number, m = model) => ({
    custom_id: `req-${i}`,
    body: { model: m, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 4 },
  });
  const ended = (id: string) =>
    eventually(
      () => client.batches.retrieve(id),
      (b) => ENDED.includes(b.status!),
      60_000,
    );
  const jsonl = async (fileId: string) =>
    (await (await client.files.content(fileId)).text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));

  test('every line answered once, in input order; a refused line in the error file; files removed after retention', async () => {
    const lines = [chat(0), chat(1), chat(2, `${tenant.projectSlug}/no-such-endpoint`), chat(3)];
    const before = await modelServerRequests(p, model);
    const inputFileId = await uploadBatchInput(p, tenant.key, lines);
    const created = await client.batches.create({ endpoint: '/v1/chat/completions', input_file_id: inputFileId });
    assert.equal(created.job?.status, 'VALIDATING');
    assert.equal(created.job?.input_file_id, inputFileId);
    const listed = await client.batches.list();
    assert.ok(listed.some((b) => b.id === created.job!.id));

    const done = await ended(created.job!.id!);
    assert.equal(done.status, 'COMPLETED', JSON.stringify(done));
    assert.equal(done.progress, 100);
    assert.ok(done.completed_at && done.job_deadline);
    const output = await jsonl(done.output_file_id!);
    assert.deepEqual(
      output.map((o) => [o.custom_id, o.response.status_code]),
      [
        ['req-0', 200],
        ['req-1', 200],
        ['req-3', 200],
      ],
    );
    for (const o of output) assert.equal(o.response.body.object, 'chat.completion');
    const errors = await jsonl(done.error_file_id!);
    assert.deepEqual(
      errors.map((e) => [e.custom_id, e.response.status_code]),
      [['req-2', 404]],
    );
    assert.match(errors[0].error.message, /no-such-endpoint/);
    assert.equal((await modelServerRequests(p, model)) - before, 3, 'one generation per answered line');
    const outputFile = await client.files.retrieve(done.output_file_id!);
    assert.equal(outputFile.purpose, 'batch-api');

    // After the retention (here ~9 s) the input, output and error files are gone.
    for (const id of [inputFileId, done.output_file_id!, done.error_file_id!])
      await eventually(
        () => call(p.baseUrl, 'GET', `/v1/files/${id}`, { key: tenant.key }),
        (r) => r.status === 404,
        30_000,
        500,
      );
  });

  test('a bad line fails the batch before any call, naming the line; a duplicate custom_id likewise', async () => {
    const before = await modelServerRequests(p, model);
    const bad = await uploadBatchInput(p, tenant.key, [chat(0), chat(1), { custom_id: 'x', body: {} }, chat(0)]);
    const job = (await client.batches.create({ endpoint: '/v1/chat/completions', input_file_id: bad })).job!;
    const failed = await ended(job.id!);
    assert.equal(failed.status, 'FAILED');
    assert.match(failed.error!, /^Line 3: /);
    assert.equal(failed.output_file_id, undefined);
    const report = await jsonl(failed.error_file_id!);
    assert.deepEqual(
      report.map((r) => r.line),
      [3, 4],
    );
    assert.match(report[1].error.message, /^Line 4: custom_id 'req-0' is used by an earlier line/);
    assert.equal(await modelServerRequests(p, model), before, 'no line was sent');
    // Another project's key finds no such batch, and cannot cancel it.
    const other = await createTenant(p.db);
    for (const [method, route] of [
      ['GET', `/v1/batches/${job.id}`],
      ['POST', `/v1/batches/${job.id}/cancel`],
    ])
      assert.equal((await call(p.baseUrl, method, route, { key: other.key })).status, 404);

    const wrong = await client.batches
      .create({ endpoint: '/v1/chat/completions', input_file_id: 'file-nope' })
      .catch((e) => e);
    assert.equal(wrong.status, 400);
    assert.equal(wrong.error.error.param, 'input_file_id');
  });

  test('cancel and the completion window end a batch with the lines answered so far', async () => {
    // Long enough that neither ends by itself first: one line at a time, 32 tokens each.
    const many = Array.from({ length: 2000 }, (_, i) => ({
      ...chat(i),
      body: { ...chat(i).body, max_tokens: 32, temperature: 0 },
    }));
    const cancelled = (
      await client.batches.create({
        endpoint: '/v1/chat/completions',
        input_file_id: await uploadBatchInput(p, tenant.key, many),
      })
    ).job!;
    await eventually(
      () => client.batches.retrieve(cancelled.id!),
      (b) => (b.progress ?? 0) > 0,
      30_000,
    );
    await client.batches.cancel(cancelled.id!);
    const stopped = await ended(cancelled.id!);
    assert.equal(stopped.status, 'CANCELLED');
    const answered = await jsonl(stopped.output_file_id!);
    assert.ok(answered.length > 0 && answered.length < many.length, `${answered.length} answered`);
    assert.deepEqual(
      answered.map((o) => o.custom_id),
      many.slice(0, answered.length).map((l) => l.custom_id),
    );

    const expiring = (
      await client.batches.create({
        endpoint: '/v1/chat/completions',
        input_file_id: await uploadBatchInput(p, tenant.key, many),
        completion_window: '3s',
      })
    ).job!;
    const expired = await ended(expiring.id!);
    assert.equal(expired.status, 'EXPIRED');
    const done = await jsonl(expired.output_file_id!);
    assert.ok(done.length > 0 && done.length < many.length, `${done.length} answered`);
    assert.ok(expired.progress! > 0 && expired.progress! < 100);
  });
});
