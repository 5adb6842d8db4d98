/**
 * The reference trainer as a process: real gradient steps on a small
 * transformer, read back through the line protocol and the files it writes.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { loadConfig } from '../../platform/config';
import { runTrainer, type TrainerRun } from '../../providers/trainer/process-trainer';
import type { TrainerEvent } from '../../providers/trainer/protocol';
import { readSafetensorsHeader } from '../../providers/trainer/safetensors';

const python = loadConfig().trainerPython;
const work = mkdtempSync(path.join(tmpdir(), 'gantry-trainer-'));

/** Byte-level tokens (4 + byte), 1 = BOS, 2 = EOS: the reference model's tokenizer. */
const enc = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => 4 + b);

function sftRows(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const prompt = enc(`Q: ${i} plus one?`);
    const answer = enc(` A: ${i + 1}.`);
    return {
      input_ids: [1, ...prompt, ...answer, 2],
      loss_mask: [0, ...prompt.map(() => 0), ...answer.map(() => 1), 1],
    };
  });
}

function dpoRows(n: number) {
  return Array.from({ length: n }, (_, i) => {
    const prompt = [1, ...enc(`Say ${i % 10}:`)];
    const good = [...enc(` ${i % 10}`), 2];
    const bad = [...enc(` no`), 2];
    return {
      chosen_ids: [...prompt, ...good],
      chosen_mask: [...prompt.map(() => 0), ...good.map(() => 1)],
      rejected_ids: [...prompt, ...bad],
      rejected_mask: [...prompt.map(() => 0), ...bad.map(() => 1)],
    };
  });
}

function writeRows(name: string, rows: object[]): string {
  const file = path.join(work, name);
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return file;
}

const trainFile = writeRows('train.jsonl', sftRows(48));
const evalFile = writeRows('eval.jsonl', sftRows(16));

function config(name: string, overrides: Record<string, unknown> = {}) {
  return {
    model: { vocab_size: 260, d_model: 64, n_layers: 2, n_heads: 4, d_ff: 128, max_seq_len: 48 },
    base_seed: 0,
    training_method: 'sft',
    training_type: 'lora',
    lora: {
      r: 8,
      alpha: 16,
      dropout: 0,
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'],
    },
    learning_rate: 0.01,
    lr_scheduler: { type: 'cosine', min_lr_ratio: 0.1, num_cycles: 0.5 },
    warmup_ratio: 0.1,
    max_grad_norm: 1.0,
    weight_decay: 0.0,
    n_epochs: 4,
    batch_size: 8,
    max_seq_length: 48,
    n_checkpoints: 2,
    n_evals: 0,
    seed: 42,
    train_file: trainFile,
    validation_file: null,
    output_dir: path.join(work, name),
    ...overrides,
  };
}

const of = <E extends TrainerEvent['event']>(run: TrainerRun, e: E) =>
  run.events.filter((x): x is Extract<TrainerEvent, { event: E }> => x.event === e);
/** The mean; a null (a non-finite value the trainer measured) makes it NaN, which no assertion passes. */
const mean = (xs: Array<number | null>) => xs.reduce<number>((a, b) => a + (b ?? NaN), 0) / xs.length;

describe('reference trainer', () => {
  after(() => rmSync(work, { recursive: true, force: true }));

  let lora: TrainerRun;

  test('LoRA SFT: loss falls, learning rate follows warmup then cosine, checkpoints and weights are written', async () => {
    lora = await runTrainer({ python, config: config('lora') });
    assert.equal(lora.exitCode, 0, lora.stderr);
    const steps = of(lora, 'step');
    assert.equal(steps.length, 24); // 48 rows / 8 per batch * 4 epochs
    assert.deepEqual(
      steps.map((s) => s.step),
      Array.from({ length: 24 }, (_, i) => i + 1),
    );
    const first = mean(steps.slice(0, 4).map((s) => s.loss));
    const last = mean(steps.slice(-4).map((s) => s.loss));
    assert.ok(last < first - 0.3, `loss fell from ${first.toFixed(3)} to ${last.toFixed(3)}`);

    const lrs = steps.map((s) => s.lr);
    assert.ok(lrs[0] < lrs[1], 'warmup raises the learning rate'); // warmup: 2 steps
    assert.ok(Math.abs(Math.max(...lrs) - 0.01) < 1e-9);
    assert.ok(Math.abs(lrs.at(-1)! - 0.001) < 0.0005, `ends near min_lr_ratio * lr, got ${lrs.at(-1)}`);

    assert.deepEqual(
      of(lora, 'checkpoint').map((c) => [c.epoch, c.step]),
      [
        [2, 12],
        [4, 24],
      ],
    );
    const done = of(lora, 'done')[0];
    assert.deepEqual(done.files, ['adapter.safetensors', 'model.safetensors', 'config.json']);
    const adapter = readSafetensorsHeader(path.join(done.output_dir, 'adapter.safetensors'));
    assert.deepEqual(adapter['layers.0.q_proj.lora_A'].shape, [64, 8]);
    assert.deepEqual(adapter['layers.1.down_proj.lora_B'].shape, [8, 64]);
    const merged = readSafetensorsHeader(path.join(done.output_dir, 'model.safetensors'));
    assert.deepEqual(merged['embed'].shape, [260, 64]);
    assert.ok(!Object.keys(merged).some((k) => k.includes('lora')), 'the merged model has the adapters folded in');
  });

  test('the same seed reproduces the run; another seed does not', async () => {
    const again = await runTrainer({ python, config: config('lora-again') });
    assert.deepEqual(
      of(again, 'step').map((s) => s.loss),
      of(lora, 'step').map((s) => s.loss),
    );
    const other = await runTrainer({ python, config: config('lora-other-seed', { seed: 7 }) });
    assert.notDeepEqual(
      of(other, 'step').map((s) => s.loss),
      of(lora, 'step').map((s) => s.loss),
    );
  });

  test('resuming from a checkpoint continues at the next step and matches the uninterrupted run', async () => {
    const checkpoint = of(lora, 'checkpoint')[0];
    const resumed = await runTrainer({ python, config: config('lora-resumed', { resume_from: checkpoint.path }) });
    assert.equal(resumed.exitCode, 0, resumed.stderr);
    assert.equal(of(resumed, 'start')[0].resumed_from_step, 12);
    const after12 = of(lora, 'step').filter((s) => s.step > 12);
    const steps = of(resumed, 'step');
    assert.deepEqual(
      steps.map((s) => s.step),
      after12.map((s) => s.step),
    );
    steps.forEach((s, i) =>
      assert.ok(
        Math.abs((s.loss ?? NaN) - (after12[i].loss ?? NaN)) < 1e-4,
        `step ${s.step}: ${s.loss} vs ${after12[i].loss}`,
      ),
    );
  });

  test('full training updates every weight and writes the whole model', async () => {
    const full = await runTrainer({
      python,
      config: config('full', { training_type: 'full', learning_rate: 0.003, n_epochs: 2 }),
    });
    assert.equal(full.exitCode, 0, full.stderr);
    const steps = of(full, 'step');
    assert.ok((steps.at(-1)!.loss ?? NaN) < (steps[0].loss ?? NaN));
    assert.ok(of(full, 'start')[0].trainable_params > 100_000);
    const done = of(full, 'done')[0];
    assert.deepEqual(done.files, ['model.safetensors', 'config.json']);
    assert.ok(readSafetensorsHeader(path.join(done.output_dir, 'model.safetensors'))['layers.1.o_proj']);
  });

  test('evaluations run n_evals times; early stopping ends the run and keeps the best step', async () => {
    const run = await runTrainer({
      python,
      config: config('early', {
        validation_file: evalFile,
        n_epochs: 6,
        n_evals: 6,
        // Demand an improvement no run can make, so patience runs out after the warmup evaluations.
        early_stopping: { enabled: true, patience: 2, min_delta: 100, warmup_evals: 1 },
      }),
    });
    assert.equal(run.exitCode, 0, run.stderr);
    const evals = of(run, 'eval');
    assert.deepEqual(
      evals.map((e) => e.step),
      [6, 12, 18],
    ); // stops at the 3rd of 6 planned evaluations
    const stopped = of(run, 'early_stopped')[0];
    assert.equal(stopped.step, 18);
    assert.equal(stopped.best_step, 6);
    assert.equal(stopped.best_metric, evals[0].eval_loss);
    const done = of(run, 'done')[0];
    assert.equal(done.early_stopped, true);
    assert.equal(done.best_step, 6);
    assert.equal(of(run, 'step').at(-1)!.step, 18);
  });

  test('DPO: the policy learns to prefer the chosen answers', async () => {
    const run = await runTrainer({
      python,
      config: config('dpo', {
        training_method: 'dpo',
        train_file: writeRows('dpo.jsonl', dpoRows(32)),
        dpo_beta: 0.5,
        learning_rate: 0.02,
        n_epochs: 5,
      }),
    });
    assert.equal(run.exitCode, 0, run.stderr);
    const steps = of(run, 'step');
    assert.ok(Math.abs(steps[0].reward_margin!) < 0.05, 'starts at the reference policy');
    assert.ok(steps.at(-1)!.reward_margin! > 0.5, `margin ${steps.at(-1)!.reward_margin}`);
    assert.ok((steps.at(-1)!.loss ?? NaN) < (steps[0].loss ?? NaN));
  });

  test("DPO's variants (SimPO with RPO; reference-free, length-normalized) also learn the preference", async () => {
    const rows = writeRows('dpo-variants.jsonl', dpoRows(32));
    for (const [name, variant] of [
      ['simpo-rpo', { simpo_gamma: 0.5, rpo_alpha: 0.5 }],
      ['reference-free', { dpo_reference_free: true, dpo_normalize_logratios_by_length: true }],
    ] as const) {
      const run = await runTrainer({
        python,
        config: config(name, {
          training_method: 'dpo',
          train_file: rows,
          dpo_beta: 0.5,
          learning_rate: 0.02,
          n_epochs: 5,
          ...variant,
        }),
      });
      assert.equal(run.exitCode, 0, run.stderr);
      const steps = of(run, 'step');
      assert.ok(
        steps.at(-1)!.reward_margin! > steps[0].reward_margin! + 0.2,
        `${name}: margin ${steps[0].reward_margin} -> ${steps.at(-1)!.reward_margin}`,
      );
      assert.ok(
        (steps.at(-1)!.loss ?? NaN) < (steps[0].loss ?? NaN),
        `${name}: loss ${steps[0].loss} -> ${steps.at(-1)!.loss}`,
      );
    }
  });

  test('cancel: SIGTERM stops the trainer after its current step, with no more steps and no weights', async () => {
    const controller = new AbortController();
    const run = await runTrainer({
      python,
      config: config('cancelled', { n_epochs: 200 }),
      signal: controller.signal,
      onEvent: (e) => {
        if (e.event === 'step' && e.step === 3) controller.abort();
      },
    });
    assert.equal(run.exitCode, 0, run.stderr);
    const cancelled = of(run, 'cancelled')[0];
    assert.ok(cancelled, 'a cancelled event');
    assert.ok(of(run, 'step').length < 20, `stopped promptly after ${of(run, 'step').length} steps`);
    assert.equal(of(run, 'done').length, 0);
    assert.ok(!existsSync(path.join(work, 'cancelled', 'final')));
  });

  test('a configuration the model cannot take fails with a reason', async () => {
    const run = await runTrainer({
      python,
      config: config('bad', { lora: { r: 8, alpha: 16, target_modules: ['gate_proj'] } }),
    });
    assert.equal(run.exitCode, 1);
    const error = of(run, 'error')[0];
    assert.match(error.message, /unknown LoRA target modules \['gate_proj'\]/);
  });
});
