/**
 * Runs a trainer as a separate process and turns its protocol lines into
 * events. The reference trainer runs on CPU with JAX; a GPU trainer speaking
 * the same protocol can replace it per host.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { TrainerKind } from '../../finetune/models';
import { parseTrainerLine, type TrainerEvent } from './protocol';

export const REFERENCE_TRAINER_DIR = path.resolve(__dirname, '../../trainers/reference');

/** Where each trainer's Python package lives (run as `python -m gantry_trainer <config>`). */
export const TRAINER_DIRS: Record<TrainerKind, string> = {
  reference: REFERENCE_TRAINER_DIR,
  torch: path.resolve(__dirname, '../../trainers/torch'),
};

/** The trainers a GPU host has: kind -> the Python interpreter that has its packages. */
export type Trainers = Partial<Record<TrainerKind, string>>;

export interface TrainerRun {
  events: TrainerEvent[];
  exitCode: number | null;
  stderr: string;
}

export interface RunTrainerOptions {
  /** Python with the trainer's requirements (./dev creates .venv/bin/python). */
  python: string;
  /** The trainer package's directory (default: the reference trainer). */
  trainerDir?: string;
  /** The run's configuration; written next to the outputs as trainer-config.json. */
  config: Record<string, unknown> & { output_dir: string };
  onEvent?: (e: TrainerEvent) => void;
  /** Aborting sends SIGTERM: the trainer finishes its current step and stops. */
  signal?: AbortSignal;
}

export async function runTrainer(opts: RunTrainerOptions): Promise<TrainerRun> {
  const configPath = path.join(opts.config.output_dir, 'trainer-config.json');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(opts.config.output_dir, { recursive: true });
  writeFileSync(configPath, JSON.stringify(opts.config, null, 2));
  const child = spawn(opts.python, ['-m', 'gantry_trainer', configPath], {
    cwd: opts.trainerDir ?? REFERENCE_TRAINER_DIR,
    env: { ...process.env, PYTHONUNBUFFERED: '1', JAX_PLATFORMS: process.env.JAX_PLATFORMS ?? 'cpu' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const onAbort = () => child.kill('SIGTERM');
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const events: TrainerEvent[] = [];
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-20_000);
  });
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    const event = parseTrainerLine(line);
    if (!event) return;
    events.push(event);
    opts.onEvent?.(event);
  });
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve(code));
  });
  opts.signal?.removeEventListener('abort', onAbort);
  return { events, exitCode, stderr };
}
