/**
 * The official SDK's fineTuning resource against Gantry, changing nothing but
 * baseURL and apiKey: every method of together-ai 0.52.0 (modelLimits,
 * preview, estimatePrice, create, retrieve, list, listEvents, listMetrics,
 * listCheckpoints, content, retrieveTokenizedDataset, cancel, delete) on a
 * real, short LoRA fine-tune of the reference model (the GPU queue's simulated
 * host runs the CPU trainer), and a second job cancelled while it trains.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import type {
  FinetuneEvent,
  FinetuneEventType,
  FinetuneResponse,
  FineTuningCancelResponse,
  FineTuningCreateResponse,
} from 'together-ai/resources/fine-tuning';
import type { BillingUsageReport } from 'together-ai/resources/beta/organization/usage';
import { setBillingUsageEnabled } from '../../db/usage-report';
import { extractTarZst, safetensorsTable } from '../helpers/archives';
import { chat, jsonl } from '../helpers/datasets';
import { eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'gantry/reference-byte-tiny';

/** The SDK's FinetuneResponse['status'] values, in the order a job moves through them. */
const STATUSES = [
  'pending',
  'queued',
  'running',
  'compressing',
  'uploading',
  'cancel_requested',
  'cancelled',
  'error',
  'completed',
] as const satisfies ReadonlyArray<FinetuneResponse['status']>;

/** Every FinetuneEventType of the SDK; the compile-time check below fails if the SDK has one more. */
const EVENT_TYPES = [
  'job_pending',
  'job_start',
  'job_stopped',
  'model_downloading',
  'model_download_complete',
  'training_data_downloading',
  'training_data_download_complete',
  'validation_data_downloading',
  'validation_data_download_complete',
  'wandb_init',
  'training_start',
  'checkpoint_save',
  'billing_limit',
  'epoch_complete',
  'training_complete',
  'model_compressing',
  'model_compression_complete',
  'model_uploading',
  'model_upload_complete',
  'job_complete',
  'job_error',
  'cancel_requested',
  'job_restarted',
  'refund',
  'warning',
  'early_stopped',
  'tokenized_dataset_upload_complete',
] as const satisfies ReadonlyArray<FinetuneEventType>;
const everyEventTypeListed: [Exclude<FinetuneEventType, (typeof EVENT_TYPES)[number]>] extends [never] ? true : false =
  true;
void everyEventTypeListed;

const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);
const isIsoDate = (s: unknown) => typeof s === 'string' && !Number.isNaN(Date.parse(s));

/** Every field the SDK's FinetuneEvent requires, with its declared type. */
function assertEvent(e: FinetuneEvent) {
  assert.equal(e.object, 'fine-tune-event');
  assert.ok((EVENT_TYPES as readonly string[]).includes(e.type), `event type ${e.type} is not in the SDK's enum`);
  assert.equal(typeof e.message, 'string');
  assert.ok(isIsoDate(e.created_at), e.created_at);
  if (e.level !== undefined && e.level !== null) assert.ok(['info', 'warning', 'error'].includes(e.level), e.level);
  if (e.step !== undefined) assert.equal(typeof e.step, 'number');
}

/** The fields FineTuningCreateResponse (= list entry, cancel response) requires. */
function assertTruncatedJob(j: FineTuningCreateResponse, tenant: Tenant) {
  assert.match(j.id, /^ft-/);
  assert.ok((STATUSES as readonly string[]).includes(j.status), j.status);
  assert.ok(isIsoDate(j.created_at) && isIsoDate(j.updated_at));
  assert.equal(j.user_id, tenant.userId);
  assert.equal(j.model, MODEL);
  assert.equal(typeof j.batch_size, 'number');
  assert.equal(typeof j.learning_rate, 'number');
}

describe('official SDK: fineTuning', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;
  let trainingFile = '';
  let validationFile = '';
  let jobId = '';
  let cancelledId = '';
  let longFile = '';
  let cancelFlow: Promise<{ running: FinetuneResponse; cancelled: FineTuningCancelResponse }>;

  before(async () => {
    p = await startTestPlatform();
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, maxRetries: 0 });
    const records = Array.from({ length: 32 }, (_, i) => chat(`What is ${i} + 1?`, `${i + 1}.`));
    trainingFile = await uploadValidated(p, tenant.key, 'train.jsonl', jsonl(...records));
    validationFile = await uploadValidated(p, tenant.key, 'eval.jsonl', jsonl(...records.slice(0, 8)));
    const many = Array.from({ length: 256 }, (_, i) => chat(`What is ${i} + 1?`, `${i + 1}.`));
    longFile = await uploadValidated(p, tenant.key, 'long.jsonl', jsonl(...many));
  });
  after(() => p.stop());

  test('modelLimits, preview and estimatePrice before training', async () => {
    const limits = await client.fineTuning.modelLimits({ model_name: MODEL });
    assert.equal(limits.model_name, MODEL);
    assert.equal(limits.max_num_epochs, 20);
    assert.equal(limits.max_seq_length_sft, 256);
    assert.equal(limits.lora_training.max_rank, 64);
    assert.deepEqual(limits.lora_training.target_modules, [
      'q_proj',
      'k_proj',
      'v_proj',
      'o_proj',
      'up_proj',
      'down_proj',
    ]);
    assert.equal(limits.supports_full_training, true);
    assert.equal(limits.full_training?.max_batch_size, 32);
    for (const k of ['min_learning_rate', 'max_learning_rate', 'default_gradient_accumulation_steps'] as const)
      assert.equal(typeof limits[k], 'number', k);
    for (const k of ['merge_output_lora', 'supports_reasoning', 'supports_tools', 'supports_vision'] as const)
      assert.equal(typeof limits[k], 'boolean', k);
    await assert.rejects(
      client.fineTuning.modelLimits({ model_name: 'nobody/no-such-model' }),
      (err: { status?: number }) => err.status === 404,
    );

    const preview = await client.fineTuning.preview({ model: MODEL, training_file: trainingFile, top_k: 2 });
    assert.equal(preview.model, MODEL);
    assert.equal(preview.dataset_format, 'conversation');
    assert.equal(preview.train_on_inputs, false);
    assert.equal(preview.max_seq_length, 256);
    assert.equal(preview.rows.length, 2);
    const [row] = preview.rows;
    assert.equal(row.input_ids.length, row.num_tokens);
    assert.equal(row.labels.length, row.num_tokens);
    assert.equal(row.truncated, false);
    assert.equal(row.tokens[0], '<s>');
    const trained = row.trained_spans.reduce((n, [s, e]) => n + (e - s), 0);
    assert.equal(trained, row.num_trained_tokens);
    assert.equal(row.labels.filter((l) => l !== -100).length, row.num_trained_tokens);

    const estimate = await client.fineTuning.estimatePrice({
      training_file: trainingFile,
      validation_file: validationFile,
      model: MODEL,
      n_epochs: 2,
      n_evals: 1,
    });
    assert.equal(estimate.estimation_available, true);
    if (!estimate.estimation_available) return;
    assert.ok(estimate.estimated_train_token_count! > 0);
    assert.ok(estimate.estimated_eval_token_count! > 0);
    assert.ok(estimate.estimated_total_price! > 0);
    assert.equal(estimate.user_limit, 100);
    assert.equal(estimate.allowed_to_proceed, true);
  });

  test('create, then watch the job go pending -> queued -> running -> uploading -> completed', async () => {
    const created = await client.fineTuning.create({
      model: MODEL,
      training_file: trainingFile,
      validation_file: validationFile,
      n_epochs: 2,
      n_checkpoints: 2,
      n_evals: 1,
      batch_size: 8,
      learning_rate: 0.01,
      max_seq_length: 32,
      suffix: 'sdk',
      random_seed: 7,
      training_type: { type: 'Lora', lora_r: 4, lora_alpha: 8 },
    });
    assertTruncatedJob(created, tenant);
    assert.equal(created.status, 'pending');
    assert.equal(created.n_epochs, 2);
    assert.equal(created.suffix, 'sdk');
    assert.equal(created.random_seed, 7);
    assert.equal(created.training_file, trainingFile);
    assert.equal(created.validation_file, validationFile);
    assert.deepEqual(created.training_type, {
      type: 'Lora',
      lora_r: 4,
      lora_alpha: 8,
      lora_dropout: 0,
      lora_trainable_modules: 'q_proj,k_proj,v_proj,o_proj,up_proj,down_proj',
    });
    assert.equal(created.training_method?.method, 'sft');
    assert.match(created.model_output_name ?? '', new RegExp(`^${tenant.projectSlug}/reference-byte-tiny-sdk-`));
    jobId = created.id;

    // A second, long job (thousands of steps), cancelled as soon as it trains (the GPU worker runs two at once).
    const long = await client.fineTuning.create({
      model: MODEL,
      training_file: longFile,
      n_epochs: 20,
      batch_size: 1,
      learning_rate: 0.001,
      max_seq_length: 32,
    });
    cancelledId = long.id;
    cancelFlow = (async () => {
      await eventually(
        () => client.fineTuning.listMetrics(long.id),
        (r) => (r.metrics?.length ?? 0) >= 1,
        60_000,
      );
      const running = await client.fineTuning.retrieve(long.id);
      return { running, cancelled: await client.fineTuning.cancel(long.id) };
    })();
    cancelFlow.catch(() => undefined); // awaited, and its failure reported, by the cancel test

    const seen: string[] = [created.status];
    const done = await eventually(
      async () => {
        const j = await client.fineTuning.retrieve(jobId);
        if (seen.at(-1) !== j.status) seen.push(j.status);
        return j;
      },
      (j) => ['completed', 'cancelled', 'error'].includes(j.status),
      90_000,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done.events?.slice(-3)));
    // Polling can miss a short state, never reorder them.
    const order = ['pending', 'queued', 'running', 'uploading', 'completed'];
    assert.deepEqual(
      seen,
      order.filter((s) => seen.includes(s)),
      `statuses seen: ${seen.join(' -> ')}`,
    );
    assert.ok(seen.includes('running'), seen.join(' -> '));
  });

  test('retrieve and list: the completed job as FinetuneResponse, the list truncated', async () => {
    const job = await client.fineTuning.retrieve(jobId);
    assert.equal(job.id, jobId);
    assert.equal(job.user_id, tenant.userId);
    assert.equal(job.model, MODEL);
    assert.equal(job.epochs_completed, 2);
    assert.equal(job.n_checkpoints, 2);
    assert.equal(job.n_evals, 1);
    assert.ok(job.token_count! > 0 && job.param_count! > 0);
    assert.equal(job.model_output_path, `fine-tunes/${jobId}/final`);
    assert.ok(isIsoDate(job.created_at) && isIsoDate(job.updated_at) && isIsoDate(job.started_at));
    assert.equal(job.early_stopped, false);
    assert.equal(job.lr_scheduler?.lr_scheduler_type, 'cosine');
    assert.match(job.model_object_id ?? '', /^ml_/);
    assert.match(job.model_object_revision_id ?? '', /^rv_/);
    assert.equal(job.model_object_name, job.model_output_name);
    assert.match(job.adapter_object_id ?? '', /^ml_/);
    assert.match(job.adapter_object_revision_id ?? '', /^rv_/);
    assert.equal(job.adapter_object_name, `${job.model_output_name}-adapter`);
    assert.ok(job.events && job.events.length > 5);
    job.events.forEach(assertEvent);

    const list = await client.fineTuning.list();
    assert.deepEqual(
      list.data.map((j) => j.id),
      [cancelledId, jobId],
      'newest first',
    );
    for (const j of list.data) assertTruncatedJob(j, tenant);
    const listed = list.data[1];
    assert.equal(listed.status, 'completed');
    assert.equal(listed.events, undefined, 'the list carries no events');
    assert.equal((listed as FinetuneResponse).model_object_id, job.model_object_id);
    assert.equal((listed as FinetuneResponse).model_object_name, undefined, 'names are resolved on retrieve only');
  });

  test('listEvents: the SDK event types, in the order the job went', async () => {
    const { data } = await client.fineTuning.listEvents(jobId);
    data.forEach(assertEvent);
    const types = data.map((e) => e.type);
    const milestones: FinetuneEventType[] = [
      'job_pending',
      'training_data_downloading',
      'tokenized_dataset_upload_complete',
      'job_start',
      'training_start',
      'checkpoint_save',
      'training_complete',
      'model_uploading',
      'model_upload_complete',
      'job_complete',
    ];
    assert.deepEqual(
      types.filter((t) => milestones.includes(t)).filter((t, i, all) => all.indexOf(t) === i),
      milestones,
      types.join(', '),
    );
    assert.equal(types.filter((t) => t === 'epoch_complete').length, 2);
    assert.equal(types.filter((t) => t === 'checkpoint_save').length, 2);
    const tokenized = data.find((e) => e.type === 'tokenized_dataset_upload_complete')!;
    assert.match(tokenized.message, new RegExp(`/v1/fine-tunes/${jobId}/download-tokenized-dataset`));
  });

  test('listMetrics: per-step numbers, filtered by step range and sampled by resolution', async () => {
    const all = (await client.fineTuning.listMetrics(jobId)).metrics ?? [];
    const steps = all.map((m) => m['train/global_step']);
    assert.ok(steps.length >= 4, `steps: ${steps.join(',')}`);
    assert.deepEqual(
      steps,
      [...steps].sort((a, b) => a - b),
      'chronological',
    );
    for (const m of all) {
      for (const k of [
        'train/global_step',
        'train/loss',
        'train/learning_rate',
        'train/grad_norm',
        'train/epoch',
        'timestamp',
      ])
        assert.equal(typeof m[k], 'number', `${k} of step ${m['train/global_step']}`);
    }
    assert.equal(all.filter((m) => typeof m['eval/loss'] === 'number').length, 1, 'n_evals = 1');

    const range = (await client.fineTuning.listMetrics(jobId, { global_step_from: 2, global_step_to: 3 })).metrics;
    assert.deepEqual(
      range?.map((m) => m['train/global_step']),
      [2, 3],
    );
    const sampled = (await client.fineTuning.listMetrics(jobId, { resolution: 2 })).metrics;
    assert.deepEqual(
      sampled?.map((m) => m['train/global_step']),
      [steps[0], steps.at(-1)],
      'uniformly sampled: first and last',
    );
    const future = new Date(Date.now() + 60_000).toISOString();
    assert.deepEqual((await client.fineTuning.listMetrics(jobId, { logged_at_from: future })).metrics, []);
    assert.equal((await client.fineTuning.listMetrics(jobId, { logged_at_to: future })).metrics?.length, steps.length);
  });

  test('listCheckpoints: `<job>:<step>` ids, the final model and adapter with their registry objects', async () => {
    const job = await client.fineTuning.retrieve(jobId);
    const { data } = await client.fineTuning.listCheckpoints(jobId);
    for (const c of data) {
      assert.ok(isIsoDate(c.created_at));
      assert.equal(typeof c.step, 'number');
      assert.equal(typeof c.checkpoint_type, 'string');
    }
    const intermediate = data.filter((c) => c.path.includes(':'));
    assert.equal(intermediate.length, 2, 'n_checkpoints = 2');
    assert.deepEqual(
      intermediate.map((c) => c.path),
      intermediate.map((c) => `${jobId}:${c.step}`),
    );
    assert.ok(intermediate[0].step < intermediate[1].step);
    for (const c of intermediate) {
      assert.equal(c.checkpoint, 'adapter');
      assert.match(c.object_id ?? '', /^ml_/);
      assert.equal(c.object_name, `${job.model_output_name}-${c.step}`);
    }
    const finals = data.filter((c) => c.path === jobId);
    assert.deepEqual(
      finals.map((c) => [c.checkpoint, c.step, c.object_id, c.object_revision_id, c.object_name]),
      [
        ['model', intermediate[1].step, job.model_object_id, job.model_object_revision_id, job.model_object_name],
        [
          'adapter',
          intermediate[1].step,
          job.adapter_object_id,
          job.adapter_object_revision_id,
          job.adapter_object_name,
        ],
      ],
    );
  });

  test('content: the merged model, the adapter and one checkpoint, each a real zstd tar archive', async () => {
    const download = async (query: Parameters<Together['fineTuning']['content']>[0]) => {
      const res = await client.fineTuning.content(query);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/zstd');
      const bytes = Buffer.from(await res.arrayBuffer());
      assert.ok(bytes.subarray(0, 4).equals(ZSTD_MAGIC), 'a Zstandard frame');
      return { files: await extractTarZst(bytes), disposition: res.headers.get('content-disposition') ?? '' };
    };
    const merged = await download({ ft_id: jobId });
    assert.deepEqual([...merged.files.keys()].sort(), ['config.json', 'model.safetensors']);
    assert.match(merged.disposition, /reference-byte-tiny-sdk-.*\.tar\.zst/);
    const model = safetensorsTable(merged.files.get('model.safetensors')!);
    assert.deepEqual(model['embed'].shape, [260, 64]);
    assert.ok(!Object.keys(model).some((k) => k.includes('lora')), 'merged: no LoRA tensors left');
    assert.deepEqual([...(await download({ ft_id: jobId, checkpoint: 'merged' })).files.keys()].sort(), [
      'config.json',
      'model.safetensors',
    ]);

    const adapter = await download({ ft_id: jobId, checkpoint: 'adapter' });
    assert.deepEqual([...adapter.files.keys()].sort(), ['adapter.safetensors', 'config.json']);
    assert.deepEqual(
      safetensorsTable(adapter.files.get('adapter.safetensors')!)['layers.0.q_proj.lora_A'].shape,
      [64, 4],
    );

    const { data } = await client.fineTuning.listCheckpoints(jobId);
    const [first, last] = data.filter((c) => c.path.includes(':'));
    const step = await download({ ft_id: jobId, checkpoint_step: first.step });
    assert.ok(step.files.has('adapter.safetensors') && !step.files.has('optimizer.safetensors'));
    assert.match(step.disposition, new RegExp(`-checkpoint-${first.step}\\.tar\\.zst`));
    const byId = await download({ ft_id: first.path });
    assert.deepEqual(byId.files.get('adapter.safetensors'), step.files.get('adapter.safetensors'));
    // The SDK: "A final checkpoint step downloads the final model; 0 or omitted downloads the final model".
    for (const finalStep of [last.step, 0]) {
      const finalModel = await download({ ft_id: jobId, checkpoint_step: finalStep });
      assert.deepEqual(
        finalModel.files.get('model.safetensors'),
        merged.files.get('model.safetensors'),
        `checkpoint_step ${finalStep}`,
      );
    }
    await assert.rejects(
      client.fineTuning.content({ ft_id: jobId, checkpoint_step: 99_999 }),
      (err: { status?: number }) => err.status === 404,
    );
  });

  test('retrieveTokenizedDataset: a pre-signed URL of the archive', async () => {
    const t = await client.fineTuning.retrieveTokenizedDataset(jobId);
    assert.equal(t.content_type, 'application/zstd');
    assert.equal(t.filename, `${jobId}-tokenized-dataset.tar.zst`);
    assert.ok(Date.parse(t.expires_at) > Date.now());
    const archive = await fetch(t.url); // the URL carries its signature, no key
    assert.equal(archive.status, 200);
    const bytes = Buffer.from(await archive.arrayBuffer());
    assert.equal(bytes.length, t.size);
    assert.ok(bytes.subarray(0, 4).equals(ZSTD_MAGIC));
    assert.deepEqual([...(await extractTarZst(bytes)).keys()], ['train.jsonl', 'validation.jsonl']);
  });

  test("organization usage: the SDK's BillingUsageReport, read with the SDK's own client.get", async () => {
    await setBillingUsageEnabled(p.db, tenant.organizationId, true);
    // The SDK declares beta.organization.usage's types but no method; its generic get is the SDK's own call.
    const month = new Date().toISOString().slice(0, 7);
    const report = await client.get<BillingUsageReport>('/billing/usage', { query: { month } });
    assert.equal(report.object, 'list');
    assert.equal(report.currency, 'USD');
    assert.equal(report.billing_period, month);
    assert.equal(report.organization_id, tenant.organizationId);
    const items = report.data.flatMap((w) => w.line_items);
    const training = items.find((i) => i.attributes.resource_id === jobId && i.product_name.includes('Training'));
    assert.ok(training, JSON.stringify(items));
    for (const field of ['quantity', 'unit_price', 'cost'] as const) assert.match(training[field], /^-?\d+(\.\d+)?$/);
    assert.ok(report.data.every((w) => w.start_time < w.end_time && w.date === w.start_time.slice(0, 10)));
  });

  test('cancel stops the long job; delete removes it', async () => {
    const { running, cancelled } = await cancelFlow;
    assert.equal(running.status, 'running');
    assertTruncatedJob(cancelled, tenant);
    assert.equal(cancelled.id, cancelledId);
    assert.equal(cancelled.status, 'cancel_requested');
    const done = await eventually(
      () => client.fineTuning.retrieve(cancelledId),
      (j) => j.status === 'cancelled',
      30_000,
    );
    const types = (await client.fineTuning.listEvents(cancelledId)).data.map((e) => e.type);
    assert.ok(types.includes('cancel_requested'), types.join(', '));
    assert.ok(types.indexOf('cancel_requested') < types.indexOf('job_stopped'), types.join(', '));
    assert.ok(done.epochs_completed! < 20);
    const steps = (await client.fineTuning.listMetrics(cancelledId)).metrics?.length ?? 0;
    assert.ok(steps >= 1 && steps < 256 * 20, `stopped after ${steps} of ${256 * 20} steps`);
    await assert.rejects(client.fineTuning.cancel(cancelledId), (err: { status?: number }) => err.status === 409);

    const deleted = await client.fineTuning.delete(cancelledId);
    assert.equal(typeof deleted.message, 'string');
    assert.match(deleted.message!, new RegExp(cancelledId));
    await assert.rejects(client.fineTuning.retrieve(cancelledId), (err: { status?: number }) => err.status === 404);
    assert.deepEqual(
      (await client.fineTuning.list()).data.map((j) => j.id),
      [jobId],
    );
    await client.fineTuning.delete(jobId);
    await assert.rejects(client.fineTuning.listEvents(jobId), (err: { status?: number }) => err.status === 404);
  });
});
