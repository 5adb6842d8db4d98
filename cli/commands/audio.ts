/** `gantry audio transcribe|translate`: speech to text, from a local file or a public URL. */
import { openAsBlob } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { AUDIO_EXTENSIONS, AUDIO_LIMITS } from '../../shared/audio';
import { collect, context, float, int, oneOf } from '../context';
import { usageError } from '../errors';
import { print, table } from '../output';

interface AudioOptions {
  model: string;
  language?: string;
  prompt?: string;
  responseFormat?: 'json' | 'verbose_json';
  temperature?: number;
  timestampGranularities?: string[];
  diarize?: boolean;
  minSpeakers?: number;
  maxSpeakers?: number;
}

const seconds = (s: unknown) => (typeof s === 'number' ? s.toFixed(2) : '-');

async function send(task: 'transcriptions' | 'translations', source: string, o: AudioOptions, cmd: Command) {
  const { client, out } = context(cmd);
  const form = new FormData();
  // The spec: in a binary upload, `model` (and every other field) goes before `file`.
  form.append('model', o.model);
  if (o.language) form.append('language', o.language);
  if (o.prompt) form.append('prompt', o.prompt);
  if (o.responseFormat) form.append('response_format', o.responseFormat);
  if (o.temperature !== undefined) form.append('temperature', String(o.temperature));
  (o.timestampGranularities ?? []).forEach((g, i) => form.append(`timestamp_granularities[${i}]`, g));
  if (o.diarize) form.append('diarize', 'true');
  if (o.minSpeakers !== undefined) form.append('min_speakers', String(o.minSpeakers));
  if (o.maxSpeakers !== undefined) form.append('max_speakers', String(o.maxSpeakers));
  if (/^https?:\/\//i.test(source)) {
    form.append('file', source);
  } else {
    const info = await stat(source).catch(() => null);
    if (!info?.isFile()) throw usageError(`No such file: ${source}`);
    const ext = path.extname(source).toLowerCase();
    if (!AUDIO_EXTENSIONS.includes(ext)) throw usageError(`${source}: audio files are ${AUDIO_EXTENSIONS.join(' ')}.`);
    if (info.size > AUDIO_LIMITS.uploadBytes) {
      throw usageError(`${source} is larger than ${AUDIO_LIMITS.uploadBytes / 2 ** 20} MB; pass a public URL instead.`);
    }
    form.append('file', await openAsBlob(source), path.basename(source));
  }
  const res = await client.json('POST', `/v1/audio/${task}`, { body: form });
  out.result(res, () => {
    print(res.text ?? '');
    if (Array.isArray(res.segments) && res.segments.length) {
      print(
        table(
          ['start', 'end', 'text'],
          res.segments.map((s: any) => [seconds(s.start), seconds(s.end), s.text]),
        ),
      );
    }
    if (Array.isArray(res.speaker_segments) && res.speaker_segments.length) {
      print(
        table(
          ['speaker', 'start', 'end', 'text'],
          res.speaker_segments.map((s: any) => [
            s.speaker_id,
            seconds(s.start),
            seconds(s.end),
            (s.words ?? []).map((w: any) => w.word).join(' '),
          ]),
        ),
      );
    }
  });
}

const common = (c: Command) =>
  c
    .argument('<audio>', `a local file (${AUDIO_EXTENSIONS.join(' ')}; at most 80 MB) or a public http(s) URL`)
    .requiredOption('--model <model>', 'speech model, e.g. openai/whisper-base')
    .option('--prompt <text>', 'text to bias the recognizer')
    .option(
      '--response-format <f>',
      'json (text only) or verbose_json (segments, words)',
      oneOf('json', 'verbose_json'),
    )
    .option('--temperature <x>', '0-1', float(0, 1))
    .option(
      '--timestamp-granularities <g>',
      'segment or word (repeatable; verbose_json only)',
      (v: string, prev?: string[]) => collect(oneOf('segment', 'word')(v), prev),
    );

export function addAudioCommands(program: Command) {
  const audio = program.command('audio').description('Speech transcription and translation');
  common(audio.command('transcribe').description('Transcribe speech into text'))
    .option('--language <code>', 'ISO 639-1 code of the spoken language, or auto')
    .option('--diarize', 'label words with speakers')
    .option('--min-speakers <n>', 'diarization hint', int(1, 20))
    .option('--max-speakers <n>', 'diarization hint', int(1, 20))
    .action((source: string, o: AudioOptions, cmd: Command) => send('transcriptions', source, o, cmd));
  common(audio.command('translate').description('Translate speech into English text'))
    .option('--language <code>', 'target language (English when omitted)')
    .action((source: string, o: AudioOptions, cmd: Command) => send('translations', source, o, cmd));
}
