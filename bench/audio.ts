/**
 * Transcription speed and accuracy, and Gantry's overhead over the bare recognizer.
 *
 *   npx tsx bench/audio.ts [minutes, default 3] [model, default openai/whisper-base]
 *
 * A recording of about `minutes` minutes is spoken by espeak-ng (a bank of
 * distinct sentences, two voices alternating). In interleaved rounds
 * (bench/lib/rounds.ts), with the same compute on both sides (one recognizer
 * at a time, on the same 2 CPU threads):
 *   - direct: the same recognizer on the same audio, called as one process
 *     (decode to 16 kHz, then `gantry_speech.transcribe` on the whole file);
 *   - gantry: `POST /v1/audio/transcriptions` with the WAV upload: the API,
 *     the workflow, chunking at pauses, recognition activities
 *     (GANTRY_SPEECH_SLOTS=1), assembly.
 * Judged: direct time / Gantry time (Gantry costs at most a tenth more), and
 * Gantry's word error rate against the script, which must be no worse than
 * the direct run's by more than 2 points (chunking at pauses must not cost words).
 */
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SPEECH_MODELS } from '../shared/audio';
import { call } from '../test/helpers/platform';
import { speak, speechTool, wordErrorRate } from '../test/helpers/speech';
import { createTenant } from '../test/helpers/tenants';
import { runBench, withBenchPlatform } from './lib/platform';
import { compareInRounds } from './lib/rounds';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

const BANK = [
  'The quick brown fox jumps over the lazy dog near the river bank.',
  'Please call the office tomorrow morning to confirm your appointment.',
  'Our team finished the project early and celebrated with a long lunch.',
  'The weather report promised rain but the afternoon stayed bright and warm.',
  'She packed a small bag and caught the last train to the coast.',
  'Every student must return the library books before the end of the month.',
  'The engineers tested the new bridge design with heavy trucks and sensors.',
  'A gentle breeze carried the smell of fresh bread from the bakery.',
  'He forgot his umbrella at the station and walked home in the storm.',
  'The museum opens a new exhibition about ancient maps next week.',
  'Our neighbors planted tomatoes and beans in the garden behind the house.',
  'The pilot announced a short delay because of strong winds over the mountains.',
];

async function main() {
  const minutes = Number(process.argv[2] ?? 3);
  const modelId = process.argv[3] ?? 'openai/whisper-base';
  const model = SPEECH_MODELS.find((m) => m.id === modelId);
  if (!model) throw new Error(`unknown speech model ${modelId}`);
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-bench-audio-'));
  const wav = path.join(dir, 'recording.wav');

  // About 4.2 s per sentence with its pause: enough sentences for the length asked.
  const count = Math.ceil((minutes * 60) / 4.2);
  const script = Array.from({ length: count }, (_, i) => ({
    text: BANK[i % BANK.length],
    voice: i % 2 ? 'en-us+f3' : 'en-us',
    pause_after: 0.6,
  }));
  const spoken = await speak(wav, script, path.join(dir, 'script.json'));
  const reference = script.map((s) => s.text).join(' ');
  say(`spoke ${script.length} sentences: ${spoken.duration.toFixed(1)} s of audio`);

  // Direct: the recognizer alone, one process, the whole file.
  const directRun = async () => {
    const t0 = performance.now();
    const decoded = path.join(dir, 'decoded.wav');
    await speechTool('decode', ['--input', wav, '--output', decoded]);
    const direct = await speechTool<{ segments: Array<{ text: string }> }>('transcribe', [
      '--input',
      decoded,
      '--model',
      model.backend,
      '--language',
      'en',
    ]);
    const seconds = (performance.now() - t0) / 1000;
    const text = direct.segments.map((s) => s.text.trim()).join(' ');
    return { seconds, real_time_factor: seconds / spoken.duration, word_error_rate: wordErrorRate(reference, text) };
  };

  await withBenchPlatform(say, { speech: true, env: { GANTRY_SPEECH_SLOTS: '1' } }, async (platform) => {
    const tenant = await createTenant(platform.db);
    const body = await readFile(wav);
    const gantryRun = async () => {
      const f = new FormData();
      f.append('model', model.id);
      f.append('language', 'en');
      f.append('file', new Blob([body]), 'recording.wav');
      const t0 = performance.now();
      const res = await call(platform.baseUrl, 'POST', '/v1/audio/transcriptions', { key: tenant.key, body: f });
      const seconds = (performance.now() - t0) / 1000;
      if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${JSON.stringify(res.body)}`);
      return {
        seconds,
        real_time_factor: seconds / spoken.duration,
        word_error_rate: wordErrorRate(reference, res.body.text),
      };
    };
    say(`${model.id}; chunks of about ${platform.config.audioChunkSeconds} s`);
    await compareInRounds({
      bench: 'audio',
      reference: directRun,
      gantry: gantryRun,
      checks: [
        { name: 'speed, direct time / Gantry time', value: (r, g) => r.seconds / g.seconds, atLeast: 0.9 },
        {
          name: 'word error rate, Gantry - direct',
          value: (r, g) => (g.word_error_rate - r.word_error_rate) * 100,
          atMost: 2,
          unit: 'points',
        },
      ],
    });
  });
}

runBench(main);
