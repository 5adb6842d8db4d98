/**
 * A validating worker killed mid-file: Temporal notices the missing
 * heartbeats, retries the activity on another worker, and that worker resumes
 * from the last heartbeat (not from byte 0) and reaches the same report a
 * single uninterrupted pass gives.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { validateJsonl } from '../../datasets/jsonl';
import { buildReport } from '../../datasets/report';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

/** ~120 MB of conversations; the last record is broken so the verdict names a far line. */
function bigDataset(): { content: Buffer; lines: number } {
  const lines: string[] = [];
  let size = 0;
  for (let i = 0; size < 120 * 1024 * 1024; i++) {
    const line = JSON.stringify({
      messages: [
        { role: 'user', content: `Question ${i}: what is ${i} plus ${i * 7}? Explain step by step, please.` },
        { role: 'assistant', content: `${i} plus ${i * 7} is ${i * 8}: start from ${i} and add ${i * 7}.` },
      ],
    });
    lines.push(line);
    size += line.length + 1;
  }
  lines.push(JSON.stringify({ messages: [{ role: 'user', content: 'and no answer' }] }));
  return { content: Buffer.from(lines.join('\n') + '\n'), lines: lines.length };
}

describe('validation survives the loss of its worker', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  const workers: StartedProcess[] = [];
  const workerEnv = { GANTRY_WORKER_SHUTDOWN_GRACE_SECONDS: '1' };

  before(async () => {
    p = await startTestPlatform({
      controlWorker: false,
      env: { GANTRY_VALIDATION_HEARTBEAT_TIMEOUT_SECONDS: '2', GANTRY_MAX_UPLOAD_BYTES: String(512 * 1024 * 1024) },
    });
    tenant = await createTenant(p.db);
  });
  after(async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    await p.stop();
  });

  test('a worker killed mid-file: the next one resumes from the heartbeat and gives the same report', async () => {
    const { content, lines } = bigDataset();
    const expected = buildReport('x', 'jsonl', await validateJsonl(Readable.from([content]), 'fine-tune'));
    assert.equal(expected.valid, false);
    assert.match(expected.error!, new RegExp(`^Line ${lines}: `));

    const first = startProcess('workers/control.ts', workerEnv);
    workers.push(first);
    await first.waitFor(/control worker polling/);

    const body = new FormData();
    body.append('purpose', 'fine-tune');
    body.append('file_name', 'big.jsonl');
    body.append('file', new Blob([content]), 'big.jsonl');
    const uploaded = await call(p.baseUrl, 'POST', '/v1/files/upload', { key: tenant.key, body });
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    const fileId = uploaded.body.id;

    // Kill the worker as soon as the server has a heartbeat with a position in the file.
    const handle = p.temporal.workflow.getHandle(`file-validation/${fileId}`);
    await eventually(
      async () => (await handle.describe()).raw.pendingActivities?.[0]?.heartbeatDetails?.payloads?.length ?? 0,
      (n) => n > 0,
      60_000,
    );
    first.child.kill('SIGKILL');
    await first.exited;
    const during = await call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: tenant.key });
    assert.equal(during.body.processing_status, 'RUNNING', 'the first worker was killed before it finished');

    const second = startProcess('workers/control.ts', workerEnv);
    workers.push(second);
    const done = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/files/${fileId}`, { key: tenant.key }),
      (r) => r.body.processing_status !== 'RUNNING' && r.body.processing_status !== 'QUEUED',
      90_000,
    );
    assert.equal(done.body.processing_status, 'INVALID_FORMAT');
    assert.deepEqual(done.body.validation_report, { ...expected, file_id: fileId });

    const events = (await call(p.baseUrl, 'GET', `/v1/files/${fileId}/events`, { key: tenant.key })).body.data;
    const resumed = events.find((e: any) => /^Attempt \d+ resumed after line \d+/.test(e.message ?? ''));
    assert.ok(resumed, `no resume recorded: ${JSON.stringify(events)}`);
    const [, line] = /after line (\d+)/.exec(resumed.message)!;
    assert.ok(Number(line) > 0 && Number(line) < lines, `resumed after line ${line}`);
    second.child.kill('SIGTERM');
    assert.deepEqual(await second.exited, { code: 0, signal: null });
  });
});
