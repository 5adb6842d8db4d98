/**
 * The reference trainer on this machine: trained tokens per second of a short
 * LoRA SFT run on a learnable dataset, against the same jitted step in a bare
 * loop (bench/lib/bare_train_step.py: the trainer's own model, loss, optimizer
 * and batches, no trainer process around them), in interleaved rounds
 * (bench/lib/rounds.ts). Both count from the end of the first step (JIT
 * compilation) to the end of the last. Judged: trainer / bare loop. The last
 * round's loss curve is written to a JSON file (path printed).
 *
 *   npx tsx bench/trainer.ts [epochs, default 8]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../platform/config';
import { ByteTokenizer } from '../fine-tunes/tokenizer';
import { tokenizeSft } from '../fine-tunes/tokenize';
import { FINE_TUNE_MODELS } from '../fine-tunes/models';
import { REFERENCE_TRAINER_DIR, runTrainer } from '../providers/trainer/process-trainer';
import { runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

/** Runs bench/lib/bare_train_step.py on `configPath`; its JSON line. */
function bareLoop(python: string, configPath: string): Promise<{ steps: number; trained_tokens_per_second: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [path.join(__dirname, 'lib', 'bare_train_step.py'), configPath], {
      env: { ...process.env, PYTHONPATH: REFERENCE_TRAINER_DIR },
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

async function main() {
  const epochs = Number(process.argv[2] ?? 8);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-trainer-bench-'));
  try {
    const records = Array.from({ length: 256 }, (_, i) => ({
      messages: [
        { role: 'user', content: `What is ${i} + 2?` },
        { role: 'assistant', content: `${i} + 2 = ${i + 2}.` },
      ],
    }));
    const tokenizer = new ByteTokenizer();
    const { rows } = tokenizeSft(records, {
      tokenizer,
      format: 'CONVERSATION',
      trainOnInputs: 'auto',
      maxSeqLength: 128,
      packing: true,
    });
    const trainFile = path.join(work, 'train.jsonl');
    writeFileSync(trainFile, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const model = FINE_TUNE_MODELS[0];
    if (model.trainer.kind !== 'reference') throw new Error('the first catalog entry is the reference model');
    const python = loadConfig().trainerPython;
    const config = {
      model: model.trainer.model,
      base_seed: model.trainer.base_seed,
      training_method: 'sft' as const,
      training_type: 'lora' as const,
      lora: { r: 8, alpha: 16, dropout: 0, target_modules: model.limits.lora_training.target_modules },
      learning_rate: 0.01,
      lr_scheduler: { type: 'cosine', min_lr_ratio: 0.1, num_cycles: 0.5 },
      warmup_ratio: 0.05,
      n_epochs: epochs,
      batch_size: 8,
      max_seq_length: 128,
      n_checkpoints: 1,
      seed: 0,
      train_file: trainFile,
    };
    const configPath = path.join(work, 'bare-config.json');
    writeFileSync(configPath, JSON.stringify(config));
    let curve: unknown[] = [];
    let round = 0;

    const trainer = async () => {
      const stepTimes: number[] = [];
      const run = await runTrainer({
        python,
        config: { ...config, output_dir: path.join(work, `out-${round++}`) },
        onEvent: (e) => {
          if (e.event === 'step') stepTimes.push(performance.now());
        },
      });
      if (run.exitCode !== 0) throw new Error(run.stderr);
      const steps = run.events.flatMap((e) => (e.event === 'step' ? [e] : []));
      // Steady state: from the first step (after JIT compilation) to the last.
      const seconds = (stepTimes.at(-1)! - stepTimes[0]) / 1000;
      const tokens = steps.slice(1).reduce((a, s) => a + s.tokens, 0);
      curve = steps.map((s) => ({ step: s.step, epoch: s.epoch, loss: s.loss, lr: s.lr }));
      return {
        steps: steps.length,
        trained_tokens_per_second: tokens / seconds,
        loss_first: steps[0].loss ?? NaN,
        loss_last: steps.at(-1)!.loss ?? NaN,
      };
    };
    await compareInRounds({
      bench: 'trainer',
      reference: () => bareLoop(python, configPath),
      gantry: trainer,
      checks: [
        {
          name: 'trained tokens/s, trainer process / bare jitted step',
          value: (r, g) => g.trained_tokens_per_second / r.trained_tokens_per_second,
          atLeast: 0.9,
        },
      ],
    });
    const out = path.resolve('bench-trainer-loss-curve.json');
    writeFileSync(out, JSON.stringify({ model: model.name, epochs, curve }, null, 2));
    say(`loss curve of the last round: ${out}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

runBench(main);
