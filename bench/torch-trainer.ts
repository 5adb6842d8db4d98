/**
 * The PyTorch trainer (trainers/torch, the trainer of the real families) on this machine: trained
 * tokens per second of a short LoRA SFT run of HuggingFaceTB/SmolLM2-135M-Instruct from the model
 * directory, against a bare PEFT loop on the same batches and threads (bench/lib/bare_peft_step.py:
 * the same base, LoRA and AdamW, transformers' own loss, no trainer process around them), in
 * interleaved rounds (bench/lib/rounds.ts). Both count from the end of the first step to the end of
 * the last. Judged: trainer / bare loop.
 *
 *   npx tsx bench/torch-trainer.ts [epochs, default 2]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../platform/config';
import { tokenizeSft } from '../fine-tunes/tokenize';
import { findFineTuneModel } from '../fine-tunes/models';
import { REFERENCE_TRAINER_DIR, runTrainer } from '../providers/trainer/process-trainer';
import { runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

/** Runs bench/lib/bare_peft_step.py on `configPath`; its JSON line. */
function bareLoop(
  python: string,
  modelDir: string,
  configPath: string,
): Promise<{ steps: number; trained_tokens_per_second: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, [path.join(__dirname, 'lib', 'bare_peft_step.py'), configPath], {
      env: { ...process.env, PYTHONPATH: REFERENCE_TRAINER_DIR, GANTRY_MODEL_DIR: modelDir },
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
  const epochs = Number(process.argv[2] ?? 2);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-torch-trainer-bench-'));
  try {
    const records = Array.from({ length: 64 }, (_, i) => ({
      messages: [
        { role: 'user', content: `What is ${i} + 2?` },
        { role: 'assistant', content: `${i} + 2 = ${i + 2}.` },
      ],
    }));
    const model = findFineTuneModel('HuggingFaceTB/SmolLM2-135M-Instruct');
    if (!model || model.trainer.kind !== 'torch') throw new Error('SmolLM2 is a catalog model of the torch trainer');
    const tokenizer = model.tokenizer();
    const { rows } = tokenizeSft(records, {
      tokenizer,
      format: 'CONVERSATION',
      trainOnInputs: 'auto',
      maxSeqLength: 128,
      packing: true,
    });
    const trainFile = path.join(work, 'train.jsonl');
    writeFileSync(trainFile, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const { torchTrainerPython: python, modelDir } = loadConfig();
    if (!python) throw new Error('Set GANTRY_TORCH_TRAINER_PYTHON (./dev exports it).');
    const config = {
      hf_repo: model.trainer.hf_repo,
      training_method: 'sft' as const,
      training_type: 'lora' as const,
      lora: { r: 8, alpha: 16, dropout: 0, target_modules: model.limits.lora_training.target_modules },
      learning_rate: 0.0005,
      lr_scheduler: { type: 'cosine', min_lr_ratio: 0.1, num_cycles: 0.5 },
      warmup_ratio: 0.05,
      n_epochs: epochs,
      batch_size: 4,
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
        trainer: 'torch',
        modelDir,
        config: { ...config, output_dir: path.join(work, `out-${round++}`) },
        onEvent: (e) => {
          if (e.event === 'step') stepTimes.push(performance.now());
        },
      });
      if (run.exitCode !== 0) throw new Error(run.stderr);
      const steps = run.events.flatMap((e) => (e.event === 'step' ? [e] : []));
      // As the bare loop counts: from the end of the first step (warm caches) to the end of the last.
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
      bench: 'torch-trainer',
      reference: () => bareLoop(python, modelDir, configPath),
      gantry: trainer,
      checks: [
        {
          name: 'SmolLM2 LoRA trained tokens/s, torch trainer process / bare PEFT loop',
          value: (r, g) => g.trained_tokens_per_second / r.trained_tokens_per_second,
          atLeast: 0.9,
        },
      ],
    });
    say(`last round: loss ${JSON.stringify(curve.slice(0, 1))} ... ${JSON.stringify(curve.slice(-1))}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

runBench(main);
