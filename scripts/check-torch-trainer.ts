/**
 * Checks the PyTorch trainer on a GPU host (or, slowly, on CPU): tokenizes a
 * learnable dataset with a catalog model's own tokenizer, runs LoRA SFT, full
 * SFT, a resumed run and DPO through the trainer process exactly as the GPU worker
 * would, and fails unless the loss falls and the weights are written.
 *
 *   GANTRY_TORCH_TRAINER_PYTHON=... GANTRY_MODEL_DIR=... \
 *     npx tsx scripts/check-torch-trainer.ts [catalog model] [hf repo override]
 *
 * The override points at other weights of the same family (for example a
 * small random Llama with the 128256-token vocabulary) when the real base
 * weights are not on the host.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TrainingPlan } from '../shared/fine-tunes';
import { loadConfig } from '../platform/config';
import { findFineTuneModel, type FineTuneModel } from '../fine-tunes/models';
import { tokenizePreference, tokenizeSft } from '../fine-tunes/tokenize';
import { trainerConfig } from '../fine-tunes/trainer-config';
import { runTrainer, type TrainerRun } from '../providers/trainer/process-trainer';

const { torchTrainerPython: python, modelDir } = loadConfig();
if (!python) {
  process.stderr.write('Set GANTRY_TORCH_TRAINER_PYTHON to a Python with trainers/torch/requirements.txt.\n');
  process.exit(2);
}
const catalogModel = findFineTuneModel(process.argv[2] ?? 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference');
if (!catalogModel || catalogModel.trainer.kind !== 'torch')
  throw new Error('name a catalog model trained by the torch trainer');
const hfRepo = process.argv[3] ?? catalogModel.trainer.hf_repo;
const model: FineTuneModel = { ...catalogModel, trainer: { kind: 'torch', hf_repo: hfRepo } };
const tokenizer = model.tokenizer();
const work = mkdtempSync(path.join(tmpdir(), 'gantry-torch-check-'));

function plan(over: Partial<TrainingPlan>): TrainingPlan {
  return {
    model: model.name,
    training_file: 'check',
    validation_file: null,
    n_epochs: 6,
    n_checkpoints: 2,
    n_evals: 0,
    batch_size: 8,
    learning_rate: 0.003,
    lr_scheduler: { type: 'cosine', min_lr_ratio: 0.1, num_cycles: 0.5 },
    warmup_ratio: 0,
    max_grad_norm: 1,
    weight_decay: 0,
    seed: 1,
    max_seq_length: 64,
    packing: true,
    train_on_inputs: 'auto',
    method: 'sft',
    dpo_beta: 0.1,
    training_type: 'lora',
    lora: { r: 8, alpha: 16, dropout: 0, target_modules: ['q_proj', 'v_proj'] },
    early_stopping: { enabled: false, patience: 2, min_delta: 0, warmup_evals: 0 },
    suffix: null,
    ...over,
  };
}

async function train(
  name: string,
  p: TrainingPlan,
  rows: object[],
  extra: { resumeFrom?: string } = {},
): Promise<TrainerRun> {
  const trainFile = path.join(work, `${name}.jsonl`);
  writeFileSync(trainFile, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  const run = await runTrainer({
    python: python!,
    trainer: 'torch',
    modelDir,
    config: trainerConfig(p, model, { trainFile, validationFile: null, outputDir: path.join(work, name), ...extra }),
  });
  const steps = run.events.flatMap((e) => (e.event === 'step' ? [e] : []));
  const done = run.events.find((e) => e.event === 'done');
  process.stdout.write(
    `${name}: exit ${run.exitCode}, ${steps.length} steps, loss ${steps[0]?.loss?.toFixed(3)} -> ${steps.at(-1)?.loss?.toFixed(3)}` +
      (done && done.event === 'done' ? `, files ${done.files.join(' ')}\n` : '\n'),
  );
  if (run.exitCode !== 0) throw new Error(`${name} failed:\n${run.stderr.slice(-3000)}`);
  return run;
}

async function main() {
  const sft = tokenizeSft(
    Array.from({ length: 64 }, (_, i) => ({
      messages: [
        { role: 'user', content: `What is ${i} + 2?` },
        { role: 'assistant', content: `${i} + 2 = ${i + 2}.` },
      ],
    })),
    { tokenizer, format: 'CONVERSATION', maxSeqLength: 64, trainOnInputs: 'auto', packing: true },
  ).rows;
  const lora = await train('lora-sft', plan({}), sft);
  const losses = lora.events.flatMap((e) => (e.event === 'step' ? [e.loss ?? NaN] : []));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  if (!(mean(losses.slice(-3)) < mean(losses.slice(0, 3)) - 0.2)) throw new Error('LoRA SFT: the loss did not fall');
  for (const f of ['adapter.safetensors', 'model.safetensors', 'config.json']) {
    if (!existsSync(path.join(work, 'lora-sft', 'final', f))) throw new Error(`LoRA SFT wrote no ${f}`);
  }

  const full = await train(
    'full-sft',
    plan({ training_type: 'full', lora: null, n_epochs: 3, learning_rate: 0.001 }),
    sft,
  );
  const fullLosses = full.events.flatMap((e) => (e.event === 'step' ? [e.loss ?? NaN] : []));
  if (!(mean(fullLosses.slice(-3)) < mean(fullLosses.slice(0, 3)) - 0.2))
    throw new Error('full SFT: the loss did not fall');

  // Resume from the first checkpoint: the run continues at the next step.
  const ckpt = lora.events.find((e) => e.event === 'checkpoint');
  if (!ckpt || ckpt.event !== 'checkpoint') throw new Error('no checkpoint was written');
  const resumed = await train('lora-resumed', plan({}), sft, { resumeFrom: ckpt.path });
  const first = resumed.events.find((e) => e.event === 'step');
  if (!first || first.event !== 'step' || first.step !== ckpt.step + 1)
    throw new Error('resume did not continue after the checkpoint');

  const pairs = Array.from(
    { length: 32 },
    (_, i) =>
      tokenizePreference(
        {
          input: { messages: [{ role: 'user', content: `Say the number ${i}.` }] },
          preferred_output: [{ role: 'assistant', content: `${i}` }],
          non_preferred_output: [{ role: 'assistant', content: `I will not.` }],
        },
        { tokenizer, format: 'PREFERENCE_OPENAI', maxSeqLength: 64, trainOnInputs: false },
      ).row,
  );
  const dpo = await train('lora-dpo', plan({ method: 'dpo', n_epochs: 4 }), pairs);
  const margins = dpo.events.flatMap((e) => (e.event === 'step' && e.reward_margin != null ? [e.reward_margin] : []));
  if (!(mean(margins.slice(-3)) > mean(margins.slice(0, 3)))) throw new Error('DPO: the reward margin did not grow');
  process.stdout.write(`DPO reward margin ${margins[0]?.toFixed(3)} -> ${margins.at(-1)?.toFixed(3)}\nok\n`);
}

main()
  .catch((err) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => rmSync(work, { recursive: true, force: true }));
