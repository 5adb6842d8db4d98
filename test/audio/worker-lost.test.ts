/**
 * A speech host lost mid-request: the request runs on a real speech worker
 * process, which is killed while it recognizes a chunk; another worker
 * process takes the chunk over (after the heartbeat timeout) and the client
 * gets the complete transcript, seeing only latency.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { audioWorkflowId } from '../../shared/audio';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { speak, wordErrorRate } from '../helpers/speech';
import { createTenant, type Tenant } from '../helpers/tenants';

const SENTENCES = [
  'The quick brown fox jumps over the lazy dog near the river bank.',
  'Please call the office tomorrow morning to confirm your appointment.',
  'Our team finished the project early and celebrated with a long lunch.',
];

let p: TestPlatform;
let t: Tenant;
const workers: StartedProcess[] = [];

before(async () => {
  // No in-process speech host: the speech workers are real processes.
  p = await startTestPlatform({
    env: { GANTRY_AUDIO_CHUNK_SECONDS: '10', GANTRY_AUDIO_HEARTBEAT_TIMEOUT_SECONDS: '4' },
  });
  t = await createTenant(p.db);
});
after(async () => {
  for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  await p.stop();
});

const startSpeechWorker = async () => {
  const w = startProcess('workers/speech.ts', {});
  workers.push(w);
  await w.waitFor(/speech worker polling/);
  return w;
};

describe('audio: a speech worker lost mid-request', () => {
  test('the chunk it held is recognized by another worker; the transcript is whole', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-audio-lost-'));
    const script = Array.from({ length: 4 }, () => SENTENCES)
      .flat()
      .map((text) => ({ text, voice: 'en-us', pause_after: 0.6 }));
    const wav = path.join(dir, 'long.wav');
    await speak(wav, script, path.join(dir, 'long.json'));

    const first = await startSpeechWorker();
    const form = new FormData();
    form.append('model', 'openai/whisper-tiny.en');
    form.append('file', new Blob([await readFile(wav)]), 'long.wav');
    const pending = call(p.baseUrl, 'POST', '/v1/audio/transcriptions', { key: t.key, body: form });

    // Wait until the first worker is recognizing a chunk, then kill it and start another.
    let workflowId = '';
    for (const deadline = Date.now() + 30_000; !workflowId && Date.now() < deadline;) {
      const running = p.temporal.workflow.list({
        query: `WorkflowType = 'audioRequest' AND ExecutionStatus = 'Running'`,
      });
      for await (const w of running) {
        workflowId = w.workflowId;
        break;
      }
      if (!workflowId) await new Promise((r) => setTimeout(r, 100));
    }
    assert.ok(workflowId, 'the request started its workflow');
    const handle = p.temporal.workflow.getHandle(workflowId);
    await eventually(
      () => handle.describe(),
      (d) =>
        (d.raw.pendingActivities ?? []).some(
          // PENDING_ACTIVITY_STATE_STARTED: a worker holds it.
          (a) => a.activityType?.name === 'transcribeChunk' && Number(a.state) === 2,
        ),
      30_000,
    );
    first.child.kill('SIGKILL');
    await startSpeechWorker();

    const res = await pending;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const wer = wordErrorRate(script.map((s) => s.text).join(' '), res.body.text);
    assert.ok(wer < 0.25, `WER ${wer.toFixed(3)}: ${res.body.text}`);
    assert.equal(workflowId, audioWorkflowId(String(res.headers.get('x-gantry-audio-request'))));

    // The history shows a chunk retried after its worker died.
    const history = await handle.fetchHistory();
    const retried = (history.events ?? []).filter(
      (e) => e.activityTaskStartedEventAttributes && Number(e.activityTaskStartedEventAttributes.attempt) > 1,
    );
    assert.ok(retried.length >= 1, 'a chunk activity ran a second attempt');
  });
});
