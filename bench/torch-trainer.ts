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
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../platform/config';
import { findFineTuneModel } from '../fine-tunes/models';
import { runBench } from './lib/platform';
import { compareInRounds } from './lib/rounds';
import { runBareLoop, timeTrainerRun, writeAdditionTrainFile } from './lib/trainer-throughput';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);

async function main() {
  const epochs = Number(process.argv[2] ?? 2);
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-torch-trainer-bench-'));
  try {
    const model = findFineTuneModel('HuggingFaceTB/SmolLM2-135M-Instruct');
    if (!model || model.trainer.kind !== 'torch') throw new Error('SmolLM2 is a catalog model of the torch trainer');
    const trainFile = writeAdditionTrainFile(work, 64, model.tokenizer());
    const { torchTrainerPython: python, modelDir } = loadConfig();
    if (!python)
      throw new Error(
        'bench/torch-trainer.ts needs GANTRY_TORCH_TRAINER_PYTHON and the installed model: run it as `./dev bench torch-trainer`, which installs and exports both',
      );
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
      const run = await timeTrainerRun({
        python,
        trainer: 'torch',
        modelDir,
        config: { ...config, output_dir: path.join(work, `out-${round++}`) },
      });
      curve = run.curve;
      return run.sample;
    };
    await compareInRounds({
      bench: 'torch-trainer',
      reference: () => runBareLoop(python, 'bare_peft_step.py', configPath, { GANTRY_MODEL_DIR: modelDir }),
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
