/** Speech transcription and translation (spec: Audio): what a request sends, and the transcript it answers with. */
import { z } from 'zod';

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

export const TranscriptionFields = z.object({
  /** Absent: openai/whisper-large-v3 where a speech host serves it, else openai/whisper-base (api/speech-models.ts). */
  model: z.string().min(1).max(200).optional(),
  file: z.string().max(4096).optional(),
  language: z.string().max(8).optional(),
  prompt: z.string().max(4000).optional(),
  response_format: z.enum(['json', 'verbose_json']).default('json'),
  temperature: z.coerce.number().min(0).max(1).optional(),
  timestamp_granularities: z.preprocess(asList, z.array(z.enum(['segment', 'word'])).max(2)).optional(),
});
export const TranscriptionBody = TranscriptionFields.extend({
  diarize: flag.optional(),
  min_speakers: z.coerce.number().int().min(1).max(20).optional(),
  max_speakers: z.coerce.number().int().min(1).max(20).optional(),
});
