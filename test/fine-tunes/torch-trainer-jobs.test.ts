/**
 * The PyTorch trainer (the code path GPU hosts run for Llama and Qwen) trains the real
 * HuggingFaceTB/SmolLM2-135M-Instruct on CPU through the API: SFT and DPO, LoRA and full, each
 * with checkpoints, evaluations on a validation file, per-step metrics and events, and the result
 * in the model registry. Tiny datasets and 64-token rows keep each job to a minute or two.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { readSafetensorsHeader } from '../../providers/trainer/safetensors';
import { call } from '../helpers/platform';
import {
  preferenceRecords,
  sftRecords,
  SMOLLM2_PARAMETERS,
  startTorchPlatform,
  upload,
  type TorchPlatform,
} from './torch-trainer-platform';

/** 4 rows, batch 2, 2 epochs: 4 steps, a checkpoint and an evaluation at the end of each epoch. */
const SHAPE = { n_epochs: 2, n_checkpoints: 2, n_evals: 2, batch_size: 2, max_seq_length: 64, packing: false };

describe('the PyTorch trainer on SmolLM2 through the API', () => {
  let t: TorchPlatform;
  const files: Record<string, string> = {};

  before(async () => {
    t = await startTorchPlatform({ GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS: '20' });
    await t.startGpuWorker();
    files.train = await upload(t, 'sft.jsonl', sftRecords());
    files.eval = await upload(t, 'sft-eval.jsonl', sftRecords(2));
    files.prefs = await upload(t, 'prefs.jsonl', preferenceRecords());
    files.prefsEval = await upload(t, 'prefs-eval.jsonl', preferenceRecords(2));
  });
  after(() => t.stop());

  /** What every completed job shows its user, whatever its method and type. */
  async function assertCompleted(id: string) {
    const done = await t.finished(id);
    assert.equal(done.status, 'completed', JSON.stringify(done.events?.slice(-3)));
    assert.equal(done.epochs_completed, 2);
    const types = done.events.map((e: any) => e.type);
    for (const type of ['training_start', 'training_complete', 'job_complete'])
      assert.ok(types.includes(type), types.join(','));
    assert.equal(types.filter((x: string) => x === 'checkpoint_save').length, 2);
    assert.equal(types.filter((x: string) => x === 'epoch_complete').length, 2);

    const metrics = await t.metrics(id);
    const steps = metrics.filter((m: any) => m['train/loss'] !== undefined);
    assert.deepEqual(
      steps.map((m: any) => m['train/global_step']),
      [1, 2, 3, 4],
      'every step recorded once',
    );
    for (const m of steps) assert.ok(Number.isFinite(m['train/loss']) && m['train/loss'] >= 0, JSON.stringify(m));
    const evals = metrics.filter((m: any) => m['eval/loss'] !== undefined);
    assert.deepEqual(
      evals.map((m: any) => m['train/global_step']),
      [2, 4],
      'n_evals = 2 over 4 steps',
    );
    for (const m of evals) assert.ok(Number.isFinite(m['eval/loss']) && m['eval/loss'] > 0);

    const checkpoints = await t.checkpoints(id);
    assert.deepEqual(
      checkpoints.filter((c: any) => c.checkpoint_type === 'intermediate').map((c: any) => c.step),
      [2, 4],
    );
    // The registry holds the result, named for the user, with its parameters counted from its weights.
    assert.match(done.model_object_id, /^ml_/);
    assert.ok(done.events.some((e: any) => e.message.includes(`Registered ${done.model_output_name} (`)));
    const models = `/v2/projects/${t.a.projectId}/models`;
    const model = (await call(t.p.baseUrl, 'GET', `${models}/${done.model_object_id}`, { key: t.a.key })).body;
    assert.equal(model.name, done.model_output_name);
    // The merged or fully trained model is SmolLM2 itself, tensor for tensor: what a server loads.
    assert.equal(model.weights.parameters.total, String(SMOLLM2_PARAMETERS));
    const weights = readSafetensorsHeader(t.p.blobs.localPath(`fine-tunes/${id}/final/model.safetensors`));
    assert.deepEqual(weights['model.layers.29.self_attn.k_proj.weight'].shape, [192, 576]);
    assert.deepEqual(weights['model.embed_tokens.weight'].shape, [49152, 576]);
    return { done, metrics: steps, checkpoints };
  }

  test('SFT with LoRA: adapter and merged model, registered with the adapter', async () => {
    const id = await t.create({
      ...SHAPE,
      training_file: files.train,
      validation_file: files.eval,
      learning_rate: 0.001,
      training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16, lora_trainable_modules: 'q_proj,v_proj' },
    });
    const { done, checkpoints } = await assertCompleted(id);
    // r·(in + out) per adapted projection, 30 layers: q_proj 576 -> 576, v_proj 576 -> 192 (3 KV heads of 64).
    assert.equal(done.param_count, 30 * (8 * (576 + 576) + 8 * (576 + 192)));
    const final = checkpoints.find((c: any) => c.checkpoint_type === 'final');
    assert.deepEqual(final.files.sort(), ['adapter.safetensors', 'config.json', 'model.safetensors']);
    const adapter = readSafetensorsHeader(t.p.blobs.localPath(`fine-tunes/${id}/final/adapter.safetensors`));
    assert.deepEqual(adapter['base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight'].shape, [192, 8]);
    assert.equal(done.adapter_object_name, `${done.model_output_name}-adapter`);
  });

  test('full SFT: the loss falls, the whole model is registered', async () => {
    const id = await t.create({
      ...SHAPE,
      training_file: files.train,
      validation_file: files.eval,
      learning_rate: 0.00001,
      training_type: { type: 'Full' },
    });
    const { done, metrics } = await assertCompleted(id);
    assert.equal(done.param_count, SMOLLM2_PARAMETERS);
    assert.equal(done.adapter_object_id ?? null, null);
    assert.ok(metrics.at(-1)['train/loss'] < metrics[0]['train/loss'], 'a full step at 1e-5 moves a 135M model');
  });

  for (const type of ['Lora', 'Full'] as const) {
    test(`DPO with ${type === 'Lora' ? 'LoRA' : 'full training'}: the reward margin starts at the reference`, async () => {
      const id = await t.create({
        ...SHAPE,
        training_file: files.prefs,
        validation_file: files.prefsEval,
        learning_rate: type === 'Lora' ? 0.001 : 0.00001,
        training_method: { method: 'dpo', dpo_beta: 0.1 },
        training_type: type === 'Lora' ? { type, lora_r: 8, lora_alpha: 16 } : { type },
      });
      const { metrics } = await assertCompleted(id);
      // Before the first update the policy is the reference model: their log-ratio is zero.
      assert.ok(Math.abs(metrics[0]['train/reward_margin']) < 1e-3, `margin ${metrics[0]['train/reward_margin']}`);
      assert.ok(metrics.every((m: any) => Number.isFinite(m['train/reward_margin'])));
    });
  }
});
