/** Speech transcription and translation (spec: Audio): what a request sends, and the transcript it answers with. */
import { z } from 'zod';
import { TRANSLATION_TARGETS } from '../../shared/audio';

const Word = z.object({ word: z.string(), start: z.number(), end: z.number() });

/** `response_format: json`: the text alone. */
const TextTranscript = z.object({ text: z.string() });

/** `verbose_json`: timings, and words and speakers when asked for. */
const VerboseTranscript = z.object({
  task: z.enum(['transcribe', 'translate']),
  language: z.string(),
  duration: z.number(),
  text: z.string(),
  segments: z.array(z.object({ id: z.number().int(), start: z.number(), end: z.number(), text: z.string() })),
  words: z.array(Word.extend({ id: z.number().int(), speaker_id: z.string().optional() })).optional(),
  speaker_segments: z
    .array(
      z.object({
        id: z.number().int(),
        speaker_id: z.string(),
        start: z.number(),
        end: z.number(),
        text: z.string(),
        words: z.array(Word.extend({ speaker_id: z.string() })),
      }),
    )
    .optional(),
});

export const TranscriptSchema = z.union([VerboseTranscript, TextTranscript]).meta({ id: 'Transcript' });

/** A multipart field: the strings `true` and `false` are booleans. */
/** A multipart field given once or repeated: always a list. */
const asList = (v: unknown) => (v === undefined ? undefined : Array.isArray(v) ? v : [v]);
const flag = z.preprocess((v) => (v === 'true' ? true : v === 'false' ? false : v), z.boolean());

/**
 * The audio: a binary part (read by multer, not this schema), or as text a public http(s) URL; the
 * route refuses a request with neither, which the document states as a required `file`. Documented
 * as the binary part the official clients send: a URL is accepted too, as the description says.
 */
const AudioFile = z
  .string()
  .max(4096)
  .meta({ format: 'binary', description: 'The audio file, or as text a public http(s) URL of it' })
  .optional();
const REQUIRES_FILE = { required: ['file'] };

/** Translations are into English (en, or auto) or on into a TRANSLATION_TARGETS language. */
const TranslationLanguage = z
  .string()
  .max(8)
  .meta({ pattern: `^(${['en', 'auto', ...Object.keys(TRANSLATION_TARGETS)].join('|')})$` })
  .optional();
/** An ISO 639-1 code (two letters) or auto, as the route reads it (in any case). */
const SpokenLanguage = z.string().max(8).meta({ pattern: '^([a-z]{2}|auto)$' }).optional();

export const TranscriptionFields = z
  .object({
    /** Absent: openai/whisper-large-v3 where a speech host serves it, else openai/whisper-base (api/speech-models.ts). */
    model: z.string().min(1).max(200).optional(),
    file: AudioFile,
    language: TranslationLanguage,
    prompt: z.string().max(4000).optional(),
    response_format: z.enum(['json', 'verbose_json']).default('json'),
    temperature: z.coerce.number().min(0).max(1).optional(),
    timestamp_granularities: z.preprocess(asList, z.array(z.enum(['segment', 'word'])).max(2)).optional(),
  })
  .meta(REQUIRES_FILE);
export const TranscriptionBody = TranscriptionFields.extend({
  language: SpokenLanguage,
  diarize: flag.optional(),
  min_speakers: z.coerce.number().int().min(1).max(20).optional(),
  max_speakers: z.coerce.number().int().min(1).max(20).optional(),
}).meta(REQUIRES_FILE);
