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
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../platform/config';
import { ByteTokenizer } from '../fine-tunes/tokenizer';
import { FINE_TUNE_MODELS } from '../fine-tunes/models';
import { runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';
import { runBareLoop, timeTrainerRun, writeAdditionTrainFile } from './lib/trainer-throughput';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

async function main() {
  const epochs = Number(process.argv[2] ?? 8);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-trainer-bench-'));
  try {
    const trainFile = writeAdditionTrainFile(work, 256, new ByteTokenizer());
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
      const run = await timeTrainerRun({
        python,
        config: { ...config, output_dir: path.join(work, `out-${round++}`) },
      });
      curve = run.curve;
      return run.sample;
    };
    await compareInRounds({
      bench: 'trainer',
      reference: () => runBareLoop(python, 'bare_train_step.py', configPath),
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
