/**
 * What the two trainer benches (bench/trainer.ts, bench/torch-trainer.ts) share: a learnable
 * dataset tokenized as Gantry tokenizes it, the bare loop's process, and one timed run of the
 * trainer process. Both count from the end of the first step (compilation, warm caches) to the end
 * of the last.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { tokenizeSft } from '../../fine-tunes/tokenize';
import type { Tokenizer } from '../../fine-tunes/tokenizer';
import { REFERENCE_TRAINER_DIR, runTrainer, type RunTrainerOptions } from '../../providers/trainer/process-trainer';

export interface TrainerSample extends Record<string, number> {
  steps: number;
  trained_tokens_per_second: number;
}

/** `n` conversations of small sums, packed to 128 tokens with `tokenizer`, written as the trainer's JSONL; its path. */
export function writeAdditionTrainFile(work: string, n: number, tokenizer: Tokenizer): string {
  const records = Array.from({ length: n }, (_, i) => ({
    messages: [
      { role: 'user', content: `What is ${i} + 2?` },
      { role: 'assistant', content: `${i} + 2 = ${i + 2}.` },
    ],
  }));
  const { rows } = tokenizeSft(records, {
    tokenizer,
    format: 'CONVERSATION',
    trainOnInputs: 'auto',
    maxSeqLength: 128,
    packing: true,
  });
  const trainFile = path.join(work, 'train.jsonl');
  writeFileSync(trainFile, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return trainFile;
}

/** Runs a bare loop (a script in bench/lib) on `configPath`; its JSON line. */
export function runBareLoop(
  python: string,
  script: string,
  configPath: string,
  env: Record<string, string> = {},
): Promise<TrainerSample> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [path.join(__dirname, script), configPath], {
      env: { ...process.env, PYTHONPATH: REFERENCE_TRAINER_DIR, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim().split('\n').at(-1)!)) : reject(new Error(`bare loop: ${err}`)),
    );
  });
}

/** One run of the trainer process, timed as the bare loop times itself; its sample and loss curve. */
export async function timeTrainerRun(
  opts: RunTrainerOptions,
): Promise<{ sample: TrainerSample & { loss_first: number; loss_last: number }; curve: unknown[] }> {
  const stepTimes: number[] = [];
  const run = await runTrainer({
    ...opts,
    onEvent: (e) => {
      if (e.event === 'step') stepTimes.push(performance.now());
    },
  });
  if (run.exitCode !== 0) throw new Error(run.stderr);
  const steps = run.events.flatMap((e) => (e.event === 'step' ? [e] : []));
  const seconds = (stepTimes.at(-1)! - stepTimes[0]) / 1000;
  const tokens = steps.slice(1).reduce((a, s) => a + s.tokens, 0);
  return {
    sample: {
      steps: steps.length,
      trained_tokens_per_second: tokens / seconds,
      loss_first: steps[0].loss ?? NaN,
      loss_last: steps.at(-1)!.loss ?? NaN,
    },
    curve: steps.map((s) => ({ step: s.step, epoch: s.epoch, loss: s.loss, lr: s.lr })),
  };
}
