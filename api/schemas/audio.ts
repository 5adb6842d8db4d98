/** Speech transcription and translation (spec: Audio): the transcript a request answers with. */
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
