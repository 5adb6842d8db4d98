/**
 * Transcription and translation through the API with the real recognizer
 * (faster-whisper, Whisper base and tiny.en from PyPI) on audio the test
 * speaks itself with espeak-ng: word error rate under 25% in every accepted
 * format, word timings in order and inside the audio, two speakers found
 * where a male and a female voice alternate, German speech translated into
 * English and on into Spanish, long audio cut into chunks whose timings
 * stitch together, and every limit and bad input of the spec.
 */
import assert from 'node:assert/strict';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { searchedAsItEnded } from '../helpers/operator-view';
import { recordHistoryIfAsked } from '../helpers/workflow-env';
import { audioWorkflowId } from '../../shared/audio';
import { setBillingUsageEnabled } from '../../db/usage-report';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { ffmpeg, speak, wordErrorRate } from '../helpers/speech';
import { createTenant, type Tenant } from '../helpers/tenants';

const SENTENCES = [
  'The quick brown fox jumps over the lazy dog near the river bank.',
  'Please call the office tomorrow morning to confirm your appointment.',
  'Our team finished the project early and celebrated with a long lunch.',
];
/** The threshold for espeak's synthetic voices (a random transcript scores near 1). */
const MAX_WER = 0.25;

let p: TestPlatform;
let t: Tenant;
let dir: string;
let wav: string;
let duration: number;
let files: Server;

before(async () => {
  p = await startTestPlatform({
    speech: true,
    // Chunks of 10 s, so the 3-sentence recording (about 16 s) is recognized in two activities.
    env: { GANTRY_AUDIO_CHUNK_SECONDS: '10', GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' },
  });
  t = await createTenant(p.db);
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-audio-'));
  wav = path.join(dir, 'three.wav');
  const spoken = await speak(
    wav,
    SENTENCES.map((text) => ({ text, voice: 'en-us', pause_after: 0.8 })),
    path.join(dir, 'three.json'),
  );
  duration = spoken.duration;
  files = createServer((req, res) => {
    readFile(path.join(dir, path.basename(req.url ?? ''))).then(
      (body) => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body),
      () => res.writeHead(404).end(),
    );
  });
  await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
});
after(async () => {
  files?.close();
  await p.stop();
});

/** A multipart request with `model` first, then the audio (a file path, or a URL string). */
async function transcribe(
  fields: Record<string, string | string[]>,
  file?: string | { url: string },
  route = 'transcriptions',
) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) for (const x of [v].flat()) form.append(k, x);
  if (typeof file === 'string') form.append('file', new Blob([await readFile(file)]), path.basename(file));
  else if (file) form.append('file', file.url);
  return call(p.baseUrl, 'POST', `/v1/audio/${route}`, { key: t.key, body: form });
}

describe('audio transcription', () => {
  test('verbose_json: the words spoken, in order, inside the audio, from two chunks', async () => {
    const res = await transcribe(
      {
        model: 'openai/whisper-base',
        response_format: 'verbose_json',
        'timestamp_granularities[0]': 'word',
        'timestamp_granularities[1]': 'segment',
        language: 'en',
      },
      wav,
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const r = res.body;
    const wer = wordErrorRate(SENTENCES.join(' '), r.text);
    assert.ok(wer < MAX_WER, `WER ${wer.toFixed(3)}: ${r.text}`);
    assert.equal(r.language, 'en');
    assert.ok(Math.abs(r.duration - duration) < 0.1, `duration ${r.duration} vs ${duration}`);
    assert.ok(r.segments.length >= 2);
    assert.ok(r.words.length >= 25);
    for (const [i, w] of r.words.entries()) {
      assert.equal(w.id, i);
      assert.ok(w.start <= w.end && w.end <= r.duration + 0.05, JSON.stringify(w));
      if (i) assert.ok(w.start >= r.words[i - 1].start, 'words in order');
    }
    // Words from the second chunk (after 10 s) carry global timings.
    assert.ok(
      r.words.some((w: { start: number }) => w.start > 10),
      'timings past the first chunk',
    );
    const requestId = String(res.headers.get('x-gantry-audio-request'));
    assert.match(requestId, /^audio/);
    assert.deepEqual(
      await searchedAsItEnded(p.temporal, `audio/${requestId}`, {
        type: 'audioRequest',
        label: 'completed-final-status',
      }),
      { status: 'COMPLETED', phase: 'done' },
      'operators find it by how it ended',
    );
    // Billed as the minutes of audio it recognized, at the model's price.
    await setBillingUsageEnabled(p.db, t.organizationId, true);
    const report = await call(p.baseUrl, 'GET', '/v1/billing/usage?granularity=hourly', { key: t.key });
    const billed = report.body.data
      .flatMap((w: any) => w.line_items)
      .filter((i: any) => i.attributes.resource_id === requestId);
    assert.equal(billed.length, 1, JSON.stringify(report.body));
    assert.equal(billed[0].product_name, 'Audio - Transcription Minutes');
    assert.deepEqual(billed[0].pricing_dimensions, { model: 'openai/whisper-base' });
    assert.ok(Math.abs(Number(billed[0].quantity) - r.duration / 60) < 0.0001, `${billed[0].quantity} min`);
    // Whisper base at docs/billing.md's default 0.0015 a minute; the cost rounded to the micro-dollar.
    assert.equal(billed[0].unit_price, '0.0015');
    assert.ok(
      Math.abs(Number(billed[0].cost) - Number(billed[0].quantity) * 0.0015) <= 0.000001,
      `${billed[0].cost} for ${billed[0].quantity} min`,
    );
    // Nothing the request stored is left behind: the upload its workflow was started with (the
    // evidence that a file was stored) is gone, and so is everything under the project's audio.
    const history = await p.temporal.workflow.getHandle(audioWorkflowId(requestId)).fetchHistory();
    const [input] = history.events![0].workflowExecutionStartedEventAttributes!.input!.payloads!.map((x) =>
      JSON.parse(Buffer.from(x.data!).toString()),
    );
    const uploaded: string = input.source.blobKey;
    assert.ok(uploaded.startsWith(`audio/${t.projectId}/`), uploaded);
    assert.equal(existsSync(path.join(p.config.blobDir, uploaded)), false, `${uploaded} was removed`);
    const projectAudio = path.join(p.config.blobDir, 'audio', t.projectId);
    const left = existsSync(projectAudio) ? await readdir(projectAudio, { recursive: true, withFileTypes: true }) : [];
    assert.deepEqual(
      left.filter((f) => f.isFile()).map((f) => f.name),
      [],
    );
  });

  test('every accepted format is decoded and transcribed (json)', async () => {
    const formats: Array<[string, string[]]> = [
      ['mp3', ['-c:a', 'libmp3lame', '-b:a', '64k']],
      ['m4a', ['-c:a', 'aac', '-b:a', '64k']],
      ['webm', ['-c:a', 'libopus', '-b:a', '32k']],
      ['flac', ['-c:a', 'flac']],
      ['ogg', ['-c:a', 'libvorbis', '-q:a', '3']],
      ['opus', ['-c:a', 'libopus', '-b:a', '32k']],
      ['aac', ['-c:a', 'aac', '-b:a', '64k', '-f', 'adts']],
    ];
    for (const [ext, codec] of formats) {
      const out = path.join(dir, `three.${ext}`);
      await ffmpeg(['-i', wav, ...codec, out]);
      const res = await transcribe({ model: 'openai/whisper-tiny.en' }, out);
      assert.equal(res.status, 200, `${ext}: ${JSON.stringify(res.body)}`);
      assert.deepEqual(Object.keys(res.body), ['text']);
      const wer = wordErrorRate(SENTENCES.join(' '), res.body.text);
      assert.ok(wer < MAX_WER, `${ext}: WER ${wer.toFixed(3)}: ${res.body.text}`);
    }
  });

  test("without model: the installation's default; the SDK's whisper-large-v3 is a 404 naming what is served", async () => {
    const res = await transcribe({}, wav);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const wer = wordErrorRate(SENTENCES.join(' '), res.body.text);
    assert.ok(wer < MAX_WER, `WER ${wer.toFixed(3)}: ${res.body.text}`);
    const large = await transcribe({ model: 'openai/whisper-large-v3' }, wav);
    assert.equal(large.status, 404);
    assert.equal(large.body.error.code, 'model_not_found');
    assert.match(large.body.error.message, /openai\/whisper-base, openai\/whisper-tiny\.en/);
  });

  test('a public URL is fetched by the platform', async () => {
    const port = (files.address() as AddressInfo).port;
    const res = await transcribe({ model: 'openai/whisper-tiny.en' }, { url: `http://127.0.0.1:${port}/three.mp3` });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(wordErrorRate(SENTENCES.join(' '), res.body.text) < MAX_WER);
    const missing = await transcribe({ model: 'openai/whisper-tiny.en' }, { url: `http://127.0.0.1:${port}/nope.mp3` });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.code, 'audio_url_unreachable');
  });

  test('diarize: a male and a female voice alternating are two speakers, in turn', async () => {
    const two = path.join(dir, 'two.wav');
    const spoken = await speak(
      two,
      [
        { text: SENTENCES[0], voice: 'en-us', pause_after: 0.8 },
        { text: SENTENCES[1], voice: 'en-us+f3', pitch: 70, pause_after: 0.8 },
        { text: SENTENCES[2], voice: 'en-us', pause_after: 0.5 },
      ],
      path.join(dir, 'two.json'),
    );
    const res = await transcribe(
      { model: 'openai/whisper-base', response_format: 'verbose_json', diarize: 'true', language: 'en' },
      two,
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const groups = res.body.speaker_segments as Array<{
      speaker_id: string;
      start: number;
      end: number;
      words: unknown[];
    }>;
    const speakers = [...new Set(groups.map((g) => g.speaker_id))];
    assert.equal(speakers.length, 2, JSON.stringify(groups.map((g) => [g.speaker_id, g.start, g.end])));
    assert.deepEqual(
      groups.map((g) => g.speaker_id),
      [speakers[0], speakers[1], speakers[0]],
    );
    // Each group lies within the utterance that voice spoke, give or take Whisper's word edges
    // (a segment's first word often starts in the silence before it).
    for (const [i, g] of groups.entries()) {
      const u = spoken.utterances[i];
      assert.ok(g.start >= u.start - 1 && g.end <= u.end + 1, `${JSON.stringify(g)} vs ${JSON.stringify(u)}`);
    }
    assert.ok(res.body.words.every((w: { speaker_id?: string }) => speakers.includes(w.speaker_id!)));
    const one = await transcribe(
      { model: 'openai/whisper-tiny.en', response_format: 'verbose_json', diarize: 'true', max_speakers: '1' },
      two,
    );
    assert.equal(one.status, 200);
    assert.equal(new Set(one.body.speaker_segments.map((g: { speaker_id: string }) => g.speaker_id)).size, 1);
  });

  test('translation: German speech comes back in English, or on in Spanish', async () => {
    const german = path.join(dir, 'german.wav');
    await speak(
      german,
      [{ text: 'Ich komme aus Deutschland und ich trinke gern Kaffee.', voice: 'de' }],
      path.join(dir, 'de.json'),
    );
    const res = await transcribe(
      { model: 'openai/whisper-base', response_format: 'verbose_json' },
      german,
      'translations',
    );
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.task, 'translate');
    assert.equal(res.body.language, 'en', "a translation's language is its target");
    const text = res.body.text.toLowerCase();
    assert.ok(text.includes('germany') && text.includes('coffee'), res.body.text);
    const english = await transcribe({ model: 'openai/whisper-tiny.en' }, german, 'translations');
    assert.equal(english.status, 400);
    assert.equal(english.body.error.param, 'model');
    // Into another language: into English by the recognizer, then on with Apertium (eng-spa).
    const spanish = await transcribe(
      { model: 'openai/whisper-base', language: 'es', response_format: 'verbose_json' },
      german,
      'translations',
    );
    assert.equal(spanish.status, 200, JSON.stringify(spanish.body));
    assert.equal(spanish.body.language, 'es');
    const es = spanish.body.text.toLowerCase();
    assert.ok(es.includes('alemania') && es.includes('café') && !es.includes('coffee'), spanish.body.text);
    assert.equal(
      spanish.body.segments.map((s: { text: string }) => s.text).join(' '),
      spanish.body.text,
      'the segments are translated too',
    );
    await recordHistoryIfAsked(
      p.temporal.workflow.getHandle(audioWorkflowId(String(spanish.headers.get('x-gantry-audio-request')))),
      'audioRequest',
      'translated-on-into-spanish',
    );
    // A language no installed pair reaches is refused, naming the ones that are.
    const target = await transcribe({ model: 'openai/whisper-base', language: 'fr' }, german, 'translations');
    assert.equal(target.status, 400);
    assert.equal(target.body.error.param, 'language');
    assert.match(target.body.error.message, /es, ca, gl/);
  });

  test('limits and bad input', async () => {
    // Over 80 MB: 413 as soon as the headers say so; the server does not wait for the body.
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(`${p.baseUrl}/v1/audio/transcriptions`);
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname,
          method: 'POST',
          headers: {
            authorization: `Bearer ${t.key}`,
            'content-type': 'multipart/form-data; boundary=x',
            'content-length': String(81 * 1024 * 1024),
          },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
          req.destroy();
        },
      );
      req.on('error', (err) => (err.message.includes('socket hang up') ? undefined : reject(err)));
      req.write(Buffer.alloc(64 * 1024)); // a first piece only: the answer comes without the rest
    });
    assert.equal(status, 413);

    // More than 4 hours (a 1 kHz WAV whose header says 4 h 0 min 1 s): audio_too_long.
    const long = path.join(dir, 'long.wav');
    const n = 14401 * 1000;
    const header = Buffer.alloc(44);
    header.write('RIFF', 0);
    header.writeUInt32LE(36 + n, 4);
    header.write('WAVEfmt ', 8);
    header.writeUInt32LE(16, 16);
    header.writeUInt16LE(1, 20);
    header.writeUInt16LE(1, 22);
    header.writeUInt32LE(1000, 24);
    header.writeUInt32LE(1000, 28);
    header.writeUInt16LE(1, 32);
    header.writeUInt16LE(8, 34);
    header.write('data', 36);
    header.writeUInt32LE(n, 40);
    await writeFile(long, Buffer.concat([header, Buffer.alloc(n, 0x80)]));
    const tooLong = await transcribe({ model: 'openai/whisper-tiny.en' }, long);
    assert.equal(tooLong.status, 400, JSON.stringify(tooLong.body));
    assert.equal(tooLong.body.error.code, 'audio_too_long');

    const junk = path.join(dir, 'junk.mp3');
    await writeFile(junk, Buffer.from('this is not audio at all, just text pretending to be an mp3 file'));
    const undecodable = await transcribe({ model: 'openai/whisper-tiny.en' }, junk);
    assert.equal(undecodable.status, 400);
    assert.equal(undecodable.body.error.code, 'audio_undecodable');
    assert.match(undecodable.body.error.message, /could not be decoded/);

    const cases: Array<[Record<string, string>, number, string | null]> = [
      [{ model: 'openai/whisper-large-v3' }, 404, null],
      [{ model: 'openai/whisper-tiny.en', temperature: '2' }, 400, 'temperature'],
      [{ model: 'openai/whisper-tiny.en', language: 'english' }, 400, 'language'],
      [{ model: 'openai/whisper-tiny.en', language: 'de' }, 400, 'language'],
      [{ model: 'openai/whisper-tiny.en', response_format: 'srt' }, 400, 'response_format'],
      [{ model: 'openai/whisper-tiny.en', min_speakers: '3', max_speakers: '2', diarize: 'true' }, 400, 'min_speakers'],
      [{ model: 'openai/whisper-tiny.en', colour: 'blue' }, 400, 'colour'],
    ];
    for (const [fields, status, param] of cases) {
      const res = await transcribe(fields, wav);
      assert.equal(res.status, status, `${JSON.stringify(fields)}: ${JSON.stringify(res.body)}`);
      if (param) assert.equal(res.body.error.param, param, JSON.stringify(res.body));
    }
    const noFile = await transcribe({ model: 'openai/whisper-tiny.en' });
    assert.equal(noFile.status, 400);
    assert.equal(noFile.body.error.param, 'file');
    const noKey = await call(p.baseUrl, 'POST', '/v1/audio/transcriptions', { body: new FormData() });
    assert.equal(noKey.status, 401);
  });
});
