/**
 * An audio batch (`/v1/audio/transcriptions`): each line's audio by URL, or by the id of one of the
 * project's files, goes through the API's own speech route with the batch's credential, and the
 * transcript (Whisper tiny.en on spoken English) is the line's answer.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { mintWorkCredential } from '../../platform/work-credentials';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { uploadBatchInput } from '../helpers/reference-endpoint';
import { speak, wordErrorRate } from '../helpers/speech';
import { createTenant, type Tenant } from '../helpers/tenants';

const TEXT = 'Please call the office tomorrow morning to confirm your appointment.';

describe('audio batches', () => {
  let p: TestPlatform;
  let t: Tenant;
  let server: Server;
  let audioUrl: string;
  let audioFileId: string;
  let audioBytes: Buffer;

  before(async () => {
    p = await startTestPlatform({ speech: true, env: { GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' } });
    t = await createTenant(p.db);
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-audio-batch-'));
    const wav = path.join(dir, 'fox.wav');
    await speak(wav, [{ text: TEXT, voice: 'en-us' }], path.join(dir, 'fox.json'));
    const bytes = readFileSync(wav);
    audioBytes = bytes;
    server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'audio/wav' }).end(bytes));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    audioUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/fox.wav`;
    // Gantry's Files API types files as jsonl, csv or parquet; a batch-api file is stored unvalidated.
    const body = new FormData();
    body.append('purpose', 'batch-api');
    body.append('file_name', 'fox.wav');
    body.append('file_type', 'jsonl');
    body.append('file', new Blob([bytes]), 'fox.wav');
    const uploaded = await call(p.baseUrl, 'POST', '/v1/files/upload', { key: t.key, body });
    assert.equal(uploaded.status, 200, JSON.stringify(uploaded.body));
    audioFileId = uploaded.body.id;
  });
  after(async () => {
    server?.close();
    await p.stop();
  });

  test('lines by URL and by file id are transcribed through the speech route', async () => {
    const input = await uploadBatchInput(p, t.key, [
      { custom_id: 'by-url', body: { file: audioUrl } },
      { custom_id: 'by-file', body: { file: audioFileId } },
      { custom_id: 'missing', body: { file: 'file-00000000-0000-0000-0000-000000000000' } },
    ]);
    const created = await call(p.baseUrl, 'POST', '/v1/batches', {
      key: t.key,
      json: { endpoint: '/v1/audio/transcriptions', input_file_id: input, model_id: 'openai/whisper-tiny.en' },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const done = await eventually(
      async () => (await call(p.baseUrl, 'GET', `/v1/batches/${created.body.job.id}`, { key: t.key })).body,
      (b) => ['COMPLETED', 'FAILED', 'EXPIRED', 'CANCELLED'].includes(b.status),
      120_000,
    );
    assert.equal(done.status, 'COMPLETED', JSON.stringify(done));
    const jsonl = async (id: string) =>
      String((await call(p.baseUrl, 'GET', `/v1/files/${id}/content`, { key: t.key })).body)
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
    const output = await jsonl(done.output_file_id);
    assert.deepEqual(
      output.map((o) => o.custom_id),
      ['by-url', 'by-file'],
    );
    for (const o of output) assert.ok(wordErrorRate(TEXT, o.response.body.text) < 0.25, o.response.body.text);
    const errors = await jsonl(done.error_file_id);
    assert.deepEqual(
      errors.map((e) => [e.custom_id, e.response.status_code]),
      [['missing', 404]],
    );
    // Billed as the batch's usage: each transcribed line's minutes of audio (the WAV's data over
    // its byte rate), none as plain transcriptions.
    const minutes = (audioBytes.length - 44) / audioBytes.readUInt32LE(28) / 60;
    const billed = await p.db.query<{ product: string; resource_id: string; quantity: string }>(
      'SELECT product, resource_id, quantity FROM usage_records WHERE project_id = $1 ORDER BY id',
      [t.projectId],
    );
    assert.deepEqual(
      billed.rows.map((r) => [r.product, r.resource_id]),
      [
        ['Batch Inference - Transcription Minutes', created.body.job.id],
        ['Batch Inference - Transcription Minutes', created.body.job.id],
      ],
    );
    for (const r of billed.rows)
      assert.ok(Math.abs(Number(r.quantity) - minutes) < 0.001, `${r.quantity} of ${minutes} minutes`);
  });

  test('a line asked again (its worker lost mid-call) joins the request it made: transcribed and billed once', async () => {
    const work = { kind: 'batch' as const, id: 'batch-audio-asked-again' };
    const ask = async () => {
      const form = new FormData();
      form.append('file', audioUrl);
      form.append('model', 'openai/whisper-tiny.en');
      const res = await fetch(`${p.baseUrl}/v1/audio/transcriptions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${mintWorkCredential(p.config.keyring!, t.keyId, work, 60)}`,
          'x-gantry-work-call': 'line-7',
        },
        body: form,
      });
      return {
        status: res.status,
        request: res.headers.get('x-gantry-audio-request'),
        body: (await res.json()) as { text: string },
      };
    };
    const [first, together] = await Promise.all([ask(), ask()]);
    const again = await ask();
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.ok(wordErrorRate(TEXT, first.body.text) < 0.25, first.body.text);
    for (const other of [together, again]) {
      assert.equal(other.status, 200, JSON.stringify(other.body));
      assert.equal(other.request, first.request, 'the same request answered');
      assert.deepEqual(other.body, first.body);
    }
    const billed = await p.db.query('SELECT quantity FROM usage_records WHERE resource_id = $1', [work.id]);
    assert.equal(billed.rowCount, 1, 'its minutes billed once');
  });
});
