/**
 * Runs a trainer as a separate process and turns its protocol lines into
 * events. The reference trainer runs on CPU with JAX; a GPU trainer speaking
 * the same protocol can replace it per host.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { TrainerKind } from '../../fine-tunes/models';
import { parseTrainerLine, TrainerProtocolError, type TrainerEvent } from './protocol';
import { subprocessEnv } from '../process/subprocess-env';
import { inheritedEnvironment } from '../../platform/config';

export const REFERENCE_TRAINER_DIR = path.resolve(__dirname, '../../trainers/reference');

/**
 * Each trainer's Python package: run as `python -m <module> <config>` from its
 * directory. The PyTorch trainer shares the reference trainer's batching,
 * schedule and protocol modules, so the reference directory is on its path.
 */
export const TRAINER_PACKAGES: Record<TrainerKind, { dir: string; module: string }> = {
  reference: { dir: REFERENCE_TRAINER_DIR, module: 'gantry_trainer' },
  torch: { dir: path.resolve(__dirname, '../../trainers/torch'), module: 'gantry_torch_trainer' },
};

/** The trainers a GPU host has: kind -> the Python interpreter that has its packages. */
export type Trainers = Partial<Record<TrainerKind, string>>;

export interface TrainerRun {
  events: TrainerEvent[];
  exitCode: number | null;
  stderr: string;
  /** True when the trainer was killed for saying nothing for `stallSeconds` (it hung). */
  stalled: boolean;
}

export interface RunTrainerOptions {
  /** Python with the trainer's requirements (./dev creates .venv/bin/python). */
  python: string;
  /** Which trainer package runs (default: the reference trainer). */
  trainer?: TrainerKind;
  /**
   * The host's model directory (GANTRY_MODEL_DIR, absolute): the PyTorch trainer reads base weights
   * from `<modelDir>/<hf_repo>` and nowhere else. It runs with its package directory as cwd.
   */
  modelDir?: string;
  /** The run's configuration; written next to the outputs as trainer-config.json. */
  config: Record<string, unknown> & { output_dir: string };
  onEvent?: (e: TrainerEvent) => void;
  /** Aborting sends SIGTERM: the trainer finishes its current step and stops. */
  signal?: AbortSignal;
  /**
   * A trainer that emits no protocol event for this long is hung (a deadlocked collective, a
   * stuck device): it is killed (SIGKILL: a hung process may never act on SIGTERM).
   */
  stallSeconds?: number;
}

export async function runTrainer(opts: RunTrainerOptions): Promise<TrainerRun> {
  const configPath = path.join(opts.config.output_dir, 'trainer-config.json');
  const { mkdirSync } = await import('node:fs');
  mkdirSync(opts.config.output_dir, { recursive: true });
  writeFileSync(configPath, JSON.stringify(opts.config, null, 2));
  const pkg = TRAINER_PACKAGES[opts.trainer ?? 'reference'];
  const inherited = inheritedEnvironment();
  const child = spawn(opts.python, ['-m', pkg.module, configPath], {
    cwd: pkg.dir,
    env: subprocessEnv({
      PYTHONUNBUFFERED: '1',
      PYTHONPATH: [pkg.dir, REFERENCE_TRAINER_DIR, inherited.PYTHONPATH].filter(Boolean).join(path.delimiter),
      JAX_PLATFORMS: inherited.JAX_PLATFORMS ?? 'cpu',
      // Where the torch trainer's base weights are; a hub is never asked for them.
      GANTRY_MODEL_DIR: opts.modelDir && path.resolve(opts.modelDir),
      HF_HUB_OFFLINE: '1',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const onAbort = () => child.kill('SIGTERM');
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const events: TrainerEvent[] = [];
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString('utf8')).slice(-20_000);
  });
  let lastEventAt = Date.now();
  let stalled = false;
  const watchdog =
    opts.stallSeconds === undefined
      ? undefined
      : setInterval(() => {
          if (Date.now() - lastEventAt < opts.stallSeconds! * 1000) return;
          stalled = true;
          child.kill('SIGKILL');
        }, 1000);
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    let event: TrainerEvent | null;
    try {
      event = parseTrainerLine(line);
    } catch (err) {
      // A trainer that breaks the protocol cannot be followed: stop it, and say why as its error.
      if (!(err instanceof TrainerProtocolError)) throw err;
      event = { event: 'error', message: err.message };
      child.kill('SIGKILL');
    }
    if (!event) return;
    lastEventAt = Date.now();
    events.push(event);
    opts.onEvent?.(event);
  });
  try {
    const exitCode = await new Promise<number | null>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => resolve(code));
    });
    return { events, exitCode, stderr, stalled };
  } finally {
    clearInterval(watchdog);
    opts.signal?.removeEventListener('abort', onAbort);
  }
}
