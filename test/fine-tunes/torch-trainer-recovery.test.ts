/**
 * The PyTorch trainer on SmolLM2 beyond the plain run: a GPU worker SIGKILLed mid-training (its
 * job continues from its checkpoint on another worker, no step counted twice, the result
 * registered once), and early stopping.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually } from '../helpers/platform';
import { sftRecords, startTorchPlatform, upload, type TorchPlatform } from './torch-trainer-platform';

describe('the PyTorch trainer on SmolLM2: a lost GPU worker, early stopping', () => {
  let t: TorchPlatform;
  before(async () => {
    t = await startTorchPlatform({ GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS: '4' });
  });
  after(() => t.stop());

  /** The step of the checkpoint the server's copy of the training activity's heartbeat names (0: none yet). */
  const heartbeatCheckpoint = async (id: string) => {
    const pending = (await t.p.temporal.workflow.getHandle(`fine-tune/${id}`).describe()).raw.pendingActivities ?? [];
    for (const a of pending) {
      const payload = a.heartbeatDetails?.payloads?.[0]?.data;
      if (!payload) continue;
      const details = JSON.parse(Buffer.from(payload).toString('utf8'));
      if (details.checkpoint) return details.checkpoint.step as number;
    }
    return 0;
  };

  test('a GPU worker killed mid-training: the job resumes from its checkpoint and is registered once', async () => {
    const file = await upload(t, 'kill.jsonl', sftRecords());
    const first = await t.startGpuWorker();
    // 4 rows, batch 2: 2 steps an epoch, a checkpoint after each of the 4 epochs.
    const id = await t.create({
      training_file: file,
      n_epochs: 4,
      n_checkpoints: 4,
      learning_rate: 0.001,
      batch_size: 2,
      max_seq_length: 64,
      packing: false,
      training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16, lora_trainable_modules: 'q_proj,v_proj' },
    });
    const savedStep = await eventually(
      () => heartbeatCheckpoint(id),
      (step) => step > 0,
      240_000,
    );
    first.child.kill('SIGKILL');
    await first.exited;

    await t.startGpuWorker();
    const done = await t.finished(id);
    assert.equal(done.status, 'completed', JSON.stringify(done.events.slice(-4)));
    const restart = done.events.find((e: any) => e.type === 'job_restarted');
    assert.ok(restart, done.events.map((e: any) => e.type).join(','));
    assert.ok(restart.step >= savedStep, `resumed from step ${restart.step}, the heartbeat named ${savedStep}`);
    assert.ok(restart.step < 8, 'the kill came before the end');
    assert.match(restart.message, /resumed from the checkpoint at step \d+/);
    assert.equal(done.epochs_completed, 4);
    const metrics = await t.metrics(id);
    assert.deepEqual(
      metrics.map((m: any) => m['train/global_step']),
      [1, 2, 3, 4, 5, 6, 7, 8],
      'every step recorded exactly once, across both workers',
    );
    // One registry model (and one adapter) for the job's result, whatever ran twice.
    const registered = await t.p.db.query<{ name: string }>(
      `SELECT name FROM registry_models WHERE source_fine_tune_id = $1 AND name IN ($2, $3)`,
      [id, done.model_output_name.split('/')[1], `${done.model_output_name.split('/')[1]}-adapter`],
    );
    assert.equal(registered.rows.length, 2, JSON.stringify(registered.rows));
    assert.equal(done.events.filter((e: any) => e.message.startsWith('Registered ')).length, 1);
  });

  test('early stopping ends the job completed, with the best step and metric', async () => {
    const train = await upload(t, 'es-train.jsonl', sftRecords());
    const validation = await upload(t, 'es-eval.jsonl', sftRecords(2));
    const id = await t.create({
      training_file: train,
      validation_file: validation,
      n_epochs: 4,
      n_evals: 4,
      learning_rate: 0.001,
      batch_size: 2,
      max_seq_length: 64,
      packing: false,
      training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16, lora_trainable_modules: 'q_proj,v_proj' },
      early_stopping_enabled: true,
      early_stopping_patience: 2,
      // An improvement no run makes: patience runs out right after the warmup evaluation.
      early_stopping_min_delta: 100,
      early_stopping_warmup_evals: 1,
    });
    const done = await t.finished(id);
    assert.equal(done.status, 'completed', JSON.stringify(done.events.slice(-4)));
    assert.equal(done.early_stopped, true);
    const evals = (await t.metrics(id)).filter((m: any) => m['eval/loss'] !== undefined);
    assert.deepEqual(
      evals.map((m: any) => m['train/global_step']),
      [2, 4, 6],
      'stopped after 3 of 4 evaluations',
    );
    assert.equal(done.epochs_completed, 2, 'the stop came at the end of the third epoch, before it counted');
    assert.equal(done.early_stopping_best_step, 2);
    assert.equal(done.early_stopping_best_metric, evals[0]['eval/loss']);
    assert.ok(done.events.some((e: any) => e.type === 'early_stopped'));
    assert.match(done.model_object_id, /^ml_/);
  });
});
