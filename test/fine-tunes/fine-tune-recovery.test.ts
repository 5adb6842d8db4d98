/**
 * Fine-tuning paths beyond the plain run: DPO, early stopping, and a GPU
 * worker lost mid-training whose job resumes from its last checkpoint.
 * Training runs in real GPU worker processes (simulated host, CPU trainer).
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { chat, jsonl } from '../helpers/datasets';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'gantry/reference-byte-tiny';

describe('fine-tuning: DPO, early stopping, a lost GPU worker', () => {
  let p: TestPlatform;
  let a: Tenant;
  const workers: StartedProcess[] = [];
  const startGpuWorker = async (env: Record<string, string> = {}) => {
    const w = startProcess('workers/gpu.ts', { GANTRY_GPU_TYPES: 'H100_SXM', GANTRY_ACCELERATOR: 'simulated', ...env });
    workers.push(w);
    await w.waitFor(/SIMULATED accelerator host/);
    return w;
  };

  /** The step of the checkpoint the server's copy of the training activity's heartbeat names (0: none yet). */
  const heartbeatCheckpoint = async (id: string) => {
    const pending = (await p.temporal.workflow.getHandle(`fine-tune/${id}`).describe()).raw.pendingActivities ?? [];
    for (const a of pending) {
      const payload = a.heartbeatDetails?.payloads?.[0]?.data;
      if (!payload) continue;
      const details = JSON.parse(Buffer.from(payload).toString('utf8'));
      if (details.checkpoint) return details.checkpoint.step as number;
    }
    return 0;
  };

  const finished = (id: string) =>
    eventually(
      () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}`, { key: a.key }),
      (r) => ['completed', 'cancelled', 'error'].includes(r.body.status),
      180_000,
    );

  before(async () => {
    // No in-process GPU worker: these tests run (and kill) real worker processes.
    p = await startTestPlatform({ gpuTypes: [], env: { GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS: '4' } });
    a = await createTenant(p.db);
  });
  after(async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    await p.stop();
  });

  test('a GPU worker killed mid-training: the job resumes from its checkpoint and completes', async () => {
    const records = Array.from({ length: 48 }, (_, i) =>
      chat(`Spell ${i}`, `${i} is spelled ${String(i).split('').join('-')}.`),
    );
    const file = await uploadValidated(p, a.key, 'train.jsonl', jsonl(...records));
    const first = await startGpuWorker();
    const res = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: a.key,
      json: {
        model: MODEL,
        training_file: file,
        n_epochs: 20,
        n_checkpoints: 20,
        learning_rate: 0.003,
        batch_size: 1,
        max_seq_length: 64,
        random_seed: 5,
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id;
    // Kill the worker once the server holds a heartbeat naming a stored checkpoint.
    const savedStep = await eventually(
      () => heartbeatCheckpoint(id),
      (step) => step > 0,
      120_000,
    ).catch(async (err) => {
      const handle = p.temporal.workflow.getHandle(`fine-tune/${id}`);
      // Say where the job was, not only that it did not get there.
      const d = await handle.describe();
      const events = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/events`, { key: a.key })).body.data;
      const pending = (d.raw.pendingActivities ?? []).map(
        (x) => `${x.activityType?.name} attempt ${x.attempt} ${x.lastFailure?.message ?? ''}`,
      );
      throw new Error(
        `${err.message}; events: ${events.map((e: any) => `${e.type}: ${e.message}`).join(' | ')}; pending: ${pending.join(', ')}`,
      );
    });
    first.child.kill('SIGKILL');
    await first.exited;

    await startGpuWorker();
    const done = await finished(id);
    assert.equal(done.body.status, 'completed', JSON.stringify(done.body.events.slice(-4)));
    const restart = done.body.events.find((e: any) => e.type === 'job_restarted');
    assert.ok(restart, done.body.events.map((e: any) => e.type).join(','));
    assert.ok(restart.step >= savedStep, `resumed from step ${restart.step}, the heartbeat named ${savedStep}`);
    assert.match(restart.message, /resumed from the checkpoint at step \d+/);
    assert.equal(done.body.epochs_completed, 20);
    const metrics = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics;
    // Every planned step is recorded exactly once, across both workers.
    assert.deepEqual(
      metrics.map((m: any) => m['train/global_step']),
      Array.from({ length: metrics.length }, (_, i) => i + 1),
    );
  });

  test('early stopping ends the job completed, with the best step and metric', async () => {
    const records = Array.from({ length: 32 }, (_, i) => chat(`Echo ${i}`, `${i}`));
    const train = await uploadValidated(p, a.key, 'es-train.jsonl', jsonl(...records));
    const validation = await uploadValidated(p, a.key, 'es-eval.jsonl', jsonl(...records.slice(0, 8)));
    const res = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: a.key,
      json: {
        model: MODEL,
        training_file: train,
        validation_file: validation,
        n_epochs: 6,
        n_evals: 6,
        learning_rate: 0.003,
        batch_size: 8,
        max_seq_length: 32,
        early_stopping_enabled: true,
        early_stopping_patience: 2,
        // An improvement no run makes: patience runs out right after the warmup evaluation.
        early_stopping_min_delta: 100,
        early_stopping_warmup_evals: 1,
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const done = await finished(res.body.id);
    assert.equal(done.body.status, 'completed');
    assert.equal(done.body.early_stopped, true);
    const metrics = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${res.body.id}/metrics`, { key: a.key })).body
      .metrics;
    const evals = metrics.filter((m: any) => m['eval/loss'] !== undefined);
    assert.equal(evals.length, 3, 'stopped after 3 of 6 evaluations');
    assert.equal(done.body.epochs_completed, 2, 'the stop came at the end of the third epoch, before it counted');
    assert.equal(done.body.early_stopping_best_step, evals[0]['train/global_step']);
    assert.equal(done.body.early_stopping_best_metric, evals[0]['eval/loss']);
    assert.ok(done.body.events.some((e: any) => e.type === 'early_stopped'));
  });

  test('a DPO job on preference data raises the reward margin', async () => {
    const pairs = Array.from({ length: 24 }, (_, i) => ({
      input: { messages: [{ role: 'user', content: `Say ${i % 10}` }] },
      preferred_output: [{ role: 'assistant', content: `${i % 10}` }],
      non_preferred_output: [{ role: 'assistant', content: 'no' }],
    }));
    const file = await uploadValidated(p, a.key, 'prefs.jsonl', jsonl(...pairs));
    const res = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: a.key,
      json: {
        model: MODEL,
        training_file: file,
        // RPO adds the chosen answers' NLL to the loss; the reward margin still starts at the reference.
        training_method: { method: 'dpo', dpo_beta: 0.5, rpo_alpha: 0.1 },
        n_epochs: 5,
        learning_rate: 0.01,
        batch_size: 8,
        max_seq_length: 48,
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.training_method, {
      method: 'dpo',
      dpo_beta: 0.5,
      dpo_normalize_logratios_by_length: false,
      dpo_reference_free: false,
      rpo_alpha: 0.1,
    });
    const done = await finished(res.body.id);
    assert.equal(done.body.status, 'completed', JSON.stringify(done.body.events.slice(-3)));
    const metrics = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${res.body.id}/metrics`, { key: a.key })).body
      .metrics;
    assert.ok(Math.abs(metrics[0]['train/reward_margin']) < 0.05);
    assert.ok(metrics.at(-1)['train/reward_margin'] > 0.5, `margin ${metrics.at(-1)['train/reward_margin']}`);
  });

  // Last: it replaces the GPU workers with one that declares a trainer hung after 15 s of silence.
  test('a hung trainer is detected, killed, and the job resumes from its checkpoint and completes', async () => {
    for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
    await startGpuWorker({ GANTRY_TRAINER_STALL_SECONDS: '15' });
    const records = Array.from({ length: 48 }, (_, i) => chat(`Count ${i}`, `${i} comes after ${i - 1}.`));
    const file = await uploadValidated(p, a.key, 'hang.jsonl', jsonl(...records));
    const res = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: a.key,
      json: {
        model: MODEL,
        training_file: file,
        n_epochs: 10,
        n_checkpoints: 10,
        learning_rate: 0.003,
        batch_size: 1,
        max_seq_length: 64,
      },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id;
    const savedStep = await eventually(
      () => heartbeatCheckpoint(id),
      (step) => step > 0,
      120_000,
    );
    // The trainer (a Python process whose command line names the job's run directory) stops
    // answering: SIGSTOP freezes it the way a deadlocked collective would, alive and silent.
    const trainer = readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .find((pid) => {
        try {
          const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
          return cmdline.includes('gantry_trainer') && cmdline.includes(id);
        } catch {
          return false; // it ended while we looked
        }
      });
    assert.ok(trainer, 'the trainer process of the job');
    process.kill(Number(trainer), 'SIGSTOP');

    const done = await finished(id);
    assert.equal(done.body.status, 'completed', JSON.stringify(done.body.events.slice(-4)));
    const hung = done.body.events.find((e: any) => e.type === 'warning' && /hung/.test(e.message));
    assert.ok(hung, done.body.events.map((e: any) => `${e.type}: ${e.message}`).join(' | '));
    assert.match(hung.message, /said nothing for 15s \(hung\)/);
    const restart = done.body.events.find((e: any) => e.type === 'job_restarted');
    assert.ok(restart && restart.step >= savedStep, `resumed from step ${restart?.step}, after ${savedStep}`);
    assert.equal(done.body.epochs_completed, 10);
    assert.throws(() => process.kill(Number(trainer), 0), 'the hung trainer was killed');
  });
});
