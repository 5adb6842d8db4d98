/**
 * What the speech tools (speech/gantry_speech: decode, transcribe, diarize) print: one JSON
 * document on stdout, `{"error": ...}` on a failing exit (speech/gantry_speech/_cli.py). Parsed
 * here with schemas, so a tool that prints something else fails the step with what it printed,
 * not later with an undefined field. The audio tests (test/audio/) run the real tools through them.
 */
import { z } from 'zod';

const Seconds = z.number().nonnegative();

export const DecodeOutput = z.object({ duration: Seconds, sample_rate: z.number().int().positive() });

export const TranscribeOutput = z.object({
  /** Null when the chunk held no speech and no language was given. */
  language: z.string().nullable(),
  language_probability: z.number().min(0).max(1),
  duration: Seconds,
  segments: z.array(z.object({ start: Seconds, end: Seconds, text: z.string() })),
  words: z.array(z.object({ word: z.string(), start: Seconds, end: Seconds })),
});

export const DiarizeOutput = z.object({
  turns: z.array(z.object({ start: Seconds, end: Seconds, speaker: z.string() })),
  speakers: z.number().int().nonnegative(),
});

export const ToolFailure = z.object({ error: z.string() });

/** The last stdout line of a tool, parsed with `schema`; a tool that broke its contract is an Error naming what it printed. */
export function parseToolOutput<S extends z.ZodType>(tool: string, stdout: string, schema: S): z.output<S> {
  const last = stdout.trim().split('\n').pop() ?? '';
  let value: unknown;
  try {
    value = JSON.parse(last);
  } catch {
    throw new Error(`speech tool ${tool} printed no JSON document: ${JSON.stringify(last.slice(0, 200))}`);
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(
      `speech tool ${tool} printed a document that breaks its contract (${issue.path.join('.') || 'document'}: ${issue.message}): ${last.slice(0, 200)}`,
    );
  }
  return parsed.data;
}
