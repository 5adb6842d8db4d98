/**
 * Audio the tests make themselves: sentences spoken by espeak-ng (from the
 * speech environment, `python -m gantry_speech.synth`), converted to each
 * accepted format with the environment's ffmpeg; and the word error rate of a
 * transcript against what was spoken.
 */
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '../../platform/config';

const run = promisify(execFile);
const SPEECH_DIR = path.resolve(__dirname, '../../speech');
const python = () => loadConfig().speechPython;

/** Runs a speech tool; its stdout is one JSON document. */
export async function speechTool<T = Record<string, unknown>>(tool: string, args: string[]): Promise<T> {
  const { stdout } = await run(python(), ['-m', `gantry_speech.${tool}`, ...args], {
    env: { ...process.env, PYTHONPATH: SPEECH_DIR },
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

export interface Utterance {
  text: string;
  voice: string;
  pause_after?: number;
  pitch?: number;
}

/** Speaks the script into one WAV; each utterance's audible start and end come back. */
export async function speak(out: string, script: Utterance[], scriptFile: string) {
  await writeFile(scriptFile, JSON.stringify(script));
  return speechTool<{ duration: number; utterances: Array<{ text: string; start: number; end: number }> }>('synth', [
    '--out',
    out,
    '--script',
    scriptFile,
  ]);
}

export async function ffmpeg(args: string[]): Promise<void> {
  const { stdout } = await run(python(), ['-c', 'import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())']);
  await run(stdout.trim(), ['-nostdin', '-v', 'error', '-y', ...args]);
}

const words = (s: string) =>
  s
    .toLowerCase()
    .replace(/[^\p{L}\p{N}' ]+/gu, ' ')
    .split(/\s+/)
    .filter(Boolean);

/** Word error rate: word-level edit distance over the reference's length. */
export function wordErrorRate(reference: string, hypothesis: string): number {
  const r = words(reference);
  const h = words(hypothesis);
  let prev = Array.from({ length: h.length + 1 }, (_, j) => j);
  for (let i = 1; i <= r.length; i++) {
    const cur = [i];
    for (let j = 1; j <= h.length; j++)
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r[i - 1] === h[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[h.length] / r.length;
}
