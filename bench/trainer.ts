/**
 * The reference trainer on this machine: trained tokens per second and the
 * loss curve of a short LoRA SFT run on a learnable dataset, written to a
 * JSON file (path printed) and summarized on stdout.
 *
 *   npx tsx bench/trainer.ts [epochs, default 8]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../common/config';
import { ByteTokenizer } from '../finetune/tokenizer';
import { tokenizeSft } from '../finetune/tokenize';
import { FINE_TUNE_MODELS } from '../finetune/models';
import { runTrainer } from '../providers/trainer/process-trainer';

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
    const started = performance.now();
    const stepTimes: number[] = [];
    const run = await runTrainer({
      python: loadConfig().trainerPython,
      config: {
        model: model.trainer.model,
        base_seed: model.trainer.base_seed,
        training_method: 'sft',
        training_type: 'lora',
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
        output_dir: path.join(work, 'out'),
      },
      onEvent: (e) => {
        if (e.event === 'step') stepTimes.push(performance.now());
      },
    });
    if (run.exitCode !== 0) throw new Error(run.stderr);
    const steps = run.events.flatMap((e) => (e.event === 'step' ? [e] : []));
    // Steady state: from the first step (after JIT compilation) to the last.
    const seconds = (stepTimes.at(-1)! - stepTimes[0]) / 1000;
    const tokens = steps.slice(1).reduce((a, s) => a + s.tokens, 0);
    const curve = steps.map((s) => ({ step: s.step, epoch: s.epoch, loss: s.loss, lr: s.lr }));
    const out = path.resolve('bench-trainer-loss-curve.json');
    writeFileSync(out, JSON.stringify({ model: model.name, epochs, steps: steps.length, curve }, null, 2));
    process.stdout.write(
      JSON.stringify(
        {
          model: model.name,
          steps: steps.length,
          trained_tokens_per_second: Math.round(tokens / seconds),
          wall_seconds_including_startup: Number(((performance.now() - started) / 1000).toFixed(2)),
          loss_first: Number(steps[0].loss.toFixed(4)),
          loss_last: Number(steps.at(-1)!.loss.toFixed(4)),
          loss_curve_file: out,
        },
        null,
        2,
      ) + '\n',
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});
