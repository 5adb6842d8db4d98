/**
 * A control worker killed mid-batch (SIGKILL, a real process): Temporal notices the slice's
 * missing heartbeats and hands it to the next worker, which runs only the lines with no recorded
 * answer. Every line ends up in the output exactly once, and the model server, counted by its own
 * `/metrics`, ran each line exactly once: the calls in flight at the kill went on to their end in
 * the gateway, which kept their answers for the next worker's asking (gateway/kept-work-calls.ts).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { modelServerRequests, readyReferenceEndpoint, uploadBatchInput } from '../helpers/reference-endpoint';
import { createTenant, type Tenant } from '../helpers/tenants';

const CONCURRENCY = 4;
const LINES = 300;

describe('a batch survives the loss of its worker', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  const workers: StartedProcess[] = [];
  const startWorker = async () => {
    const w = startProcess('workers/control.ts', {
      GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '1',
      GANTRY_PUBLIC_URL: p.baseUrl,
      GANTRY_GATEWAY_URL: p.gatewayUrl,
      GANTRY_BATCH_CONCURRENCY_PER_PROJECT: String(CONCURRENCY),
    });
    workers.push(w);
    await w.waitFor(/control worker polling/);
    return w;
  };

  before(async () => {
    // The control workers are real processes; replicas stay on the test's own container host.
    p = await startTestPlatform({
      controlWorker: false,
      containers: true,
      env: { GANTRY_BATCH_CONCURRENCY_PER_PROJECT: String(CONCURRENCY) },
    });
    tenant = await createTenant(p.db);
  });
  after(async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    await p.stop();
  });

  test('killed mid-batch: no line lost, none answered twice', async () => {
    const first = await startWorker();
    const model = await readyReferenceEndpoint(p, tenant, 'crash');
    const lines = Array.from({ length: LINES }, (_, i) => ({
      custom_id: `line-${i}`,
      body: { model, messages: [{ role: 'user', content: `line ${i}` }], max_tokens: 16 },
    }));
    const before = await modelServerRequests(p, model);
    const input = await uploadBatchInput(p, tenant.key, lines);
    const created = await call(p.baseUrl, 'POST', '/v1/batches', {
      key: tenant.key,
      json: { endpoint: '/v1/chat/completions', input_file_id: input },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.job.id;

    // Kill the worker once some lines are answered and many are not.
    const during = await eventually(
      async () => (await call(p.baseUrl, 'GET', `/v1/batches/${id}`, { key: tenant.key })).body,
      (b) => b.progress > 0,
      60_000,
      50,
    );
    first.child.kill('SIGKILL');
    await first.exited;
    assert.ok(during.progress < 100, `killed at ${during.progress}%`);

    await startWorker();
    const done = await eventually(
      async () => (await call(p.baseUrl, 'GET', `/v1/batches/${id}`, { key: tenant.key })).body,
      (b) => ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'].includes(b.status),
      120_000,
      250,
    );
    assert.equal(done.status, 'COMPLETED', JSON.stringify(done));
    const content = await call(p.baseUrl, 'GET', `/v1/files/${done.output_file_id}/content`, { key: tenant.key });
    const output = String(content.body)
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      output.map((o) => o.custom_id),
      lines.map((l) => l.custom_id),
      'every line once, in input order',
    );
    assert.ok(output.every((o) => o.response.status_code === 200));
    const ran = (await modelServerRequests(p, model)) - before;
    assert.equal(ran, LINES, `the model server ran ${ran} generations for ${LINES} lines`);
    // Billed once a line: the batch's output tokens are those its answers say, each counted once.
    const answered = output.reduce((sum, o) => sum + o.response.body.usage.completion_tokens, 0);
    await eventually(
      async () =>
        Number(
          (
            await p.db.query<{ q: string | null }>(
              `SELECT sum(quantity) AS q FROM usage_records WHERE resource_id = $1 AND product = 'Batch Inference - Output Tokens'`,
              [id],
            )
          ).rows[0].q ?? 0,
        ),
      (billed) => billed >= answered,
      30_000,
      250,
    ).then((billed) => assert.equal(billed, answered, 'output tokens billed'));
    const kept = await p.db.query<{ n: string }>(
      `SELECT count(*) AS n FROM work_call_answers WHERE work_kind = 'batch' AND work_id = $1`,
      [id],
    );
    assert.equal(Number(kept.rows[0].n), 0, "the gateway's copies of the answers are gone once the batch is done");
  });
});
