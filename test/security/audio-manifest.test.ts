/**
 * An uploaded "audio" file that is really a media manifest (DASH, HLS) names other paths of the
 * speech host; ffmpeg would open them and transcribe what it found there (another tenant's audio,
 * any media file the host holds). The attacker uploads such a manifest as an ordinary
 * transcription; it must be refused as undecodable, and the words of the file it names must never
 * come back. The same recording uploaded as itself is transcribed, so the refusal is not a
 * recognizer that hears nothing. And a prompt written like the speech tool's own options is
 * handed to it as a prompt.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { ffmpeg, speak } from '../helpers/speech';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let attacker: Tenant;
let dir: string;
/** A recording on the speech host's disk that no tenant uploaded in this request. */
let hostRecording: string;

before(async () => {
  p = await startTestPlatform({ speech: true });
  attacker = await createTenant(p.db);
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-manifest-'));
  const wav = path.join(dir, 'victim.wav');
  await speak(
    wav,
    [{ text: 'The secret meeting moved to Thursday afternoon.', voice: 'en-us' }],
    path.join(dir, 'v.json'),
  );
  hostRecording = path.join(dir, 'victim.m4a');
  await ffmpeg(['-i', wav, '-c:a', 'aac', '-b:a', '64k', hostRecording]);
});
after(async () => {
  await p?.stop();
});

async function transcribe(name: string, bytes: Buffer) {
  const form = new FormData();
  form.append('model', 'openai/whisper-tiny.en');
  form.append('file', new Blob([bytes]), name);
  return call(p.baseUrl, 'POST', '/v1/audio/transcriptions', { key: attacker.key, body: form });
}

test('the recording itself is transcribed (the control)', async () => {
  const res = await transcribe('victim.m4a', await readFile(hostRecording));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.match(String(res.body.text).toLowerCase(), /thursday/);
});

test('a DASH manifest naming a file of the speech host is refused, and nothing of that file comes back', async () => {
  const manifest = `<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT5S" minBufferTime="PT1S"
     profiles="urn:mpeg:dash:profile:isoff-on-demand:2011">
  <Period><AdaptationSet mimeType="audio/mp4"><Representation id="1" bandwidth="64000">
    <BaseURL>${hostRecording}</BaseURL>
  </Representation></AdaptationSet></Period>
</MPD>
`;
  writeFileSync(path.join(dir, 'manifest.mpd'), manifest);
  for (const name of ['audio.mp3', 'audio.mpd']) {
    const res = await transcribe(name, Buffer.from(manifest));
    assert.equal(res.status, 400, `${name}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error.param, 'file', JSON.stringify(res.body));
    assert.doesNotMatch(JSON.stringify(res.body).toLowerCase(), /thursday|secret/);
  }
});

test("a prompt that looks like the speech tool's options is only a prompt", async () => {
  const form = new FormData();
  form.append('model', 'openai/whisper-tiny.en');
  form.append('prompt', '--task=translate --input=/etc/passwd');
  form.append('file', new Blob([await readFile(hostRecording)]), 'victim.m4a');
  const res = await call(p.baseUrl, 'POST', '/v1/audio/transcriptions', { key: attacker.key, body: form });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.match(String(res.body.text).toLowerCase(), /thursday/);
});

test('an HLS playlist naming a file of the speech host is refused', async () => {
  const playlist = `#EXTM3U\n#EXT-X-TARGETDURATION:5\n#EXTINF:5,\n${hostRecording}\n#EXT-X-ENDLIST\n`;
  const res = await transcribe('audio.m3u8', Buffer.from(playlist));
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.doesNotMatch(JSON.stringify(res.body).toLowerCase(), /thursday|secret/);
});
