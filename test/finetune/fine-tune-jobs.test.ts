/**
 * Fine-tuning jobs through the API: a job trains the reference model to
 * completion on the GPU queue's worker (simulated host, CPU trainer), with
 * events, metrics, checkpoints and weights; cancel stops it; the create rules
 * name their parameter; another project sees nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { readSafetensorsHeader } from '../../providers/trainer/safetensors';
import { extractTarZst, safetensorsTable } from '../helpers/archives';
import { chat, jsonl } from '../helpers/datasets';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const MODEL = 'gantry/reference-byte-tiny';

describe('fine-tuning jobs', () => {
  let p: TestPlatform;
  let a: Tenant;
  let b: Tenant;
  let trainingFile = '';
  let validationFile = '';

  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_TRAINING_HEARTBEAT_TIMEOUT_SECONDS: '20' } });
    a = await createTenant(p.db);
    b = await createTenant(p.db);
    const records = Array.from({ length: 64 }, (_, i) => chat(`What is ${i} + 2?`, `${i} + 2 = ${i + 2}.`));
    trainingFile = await uploadValidated(p, a.key, 'train.jsonl', jsonl(...records));
    validationFile = await uploadValidated(p, a.key, 'eval.jsonl', jsonl(...records.slice(0, 16)));
  });
  after(() => p.stop());

  const create = (key: string, body: object) => call(p.baseUrl, 'POST', '/v1/fine-tunes', { key, json: body });
  const job = (id: string, key = a.key) => call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}`, { key });
  const finished = (id: string) =>
    eventually(
      () => job(id),
      (r) => ['completed', 'cancelled', 'error'].includes(r.body.status),
      120_000,
    );

  let completedId = '';

  test('a LoRA SFT job trains to completion: events, falling loss, checkpoints, weights', async () => {
    const res = await create(a.key, {
      model: MODEL,
      training_file: trainingFile,
      validation_file: validationFile,
      n_epochs: 4,
      n_checkpoints: 2,
      n_evals: 2,
      learning_rate: 0.01,
      batch_size: 8,
      max_seq_length: 64,
      suffix: 'adder',
      random_seed: 3,
      training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.match(res.body.id, /^ft-/);
    assert.equal(res.body.status, 'pending');
    assert.equal(res.body.training_type.lora_trainable_modules, 'q_proj,k_proj,v_proj,o_proj,up_proj,down_proj');
    assert.equal(res.body.lr_scheduler.lr_scheduler_type, 'cosine');
    assert.equal(res.body.random_seed, 3);
    assert.match(res.body.model_output_name, new RegExp(`^${a.projectSlug}/reference-byte-tiny-adder-`));
    completedId = res.body.id;

    const done = await finished(completedId);
    assert.equal(done.body.status, 'completed', JSON.stringify(done.body.events?.slice(-3)));
    assert.equal(done.body.epochs_completed, 4);
    assert.ok(done.body.token_count > 0);
    assert.ok(done.body.param_count > 0);
    assert.equal(done.body.model_output_path, `fine-tunes/${completedId}/final`);
    const types = done.body.events.map((e: any) => e.type);
    assert.deepEqual(types, [
      'job_pending',
      'training_data_downloading',
      'validation_data_downloading',
      'validation_data_download_complete',
      'training_data_download_complete',
      'tokenized_dataset_upload_complete',
      'job_start',
      'training_start',
      'checkpoint_save',
      'checkpoint_save',
      'training_complete',
      'model_uploading',
      'model_upload_complete',
      'job_complete',
    ]);

    const metrics = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/metrics`, { key: a.key })).body
      .metrics;
    const losses = metrics.filter((m: any) => m.loss !== undefined).map((m: any) => m.loss);
    assert.ok(losses.length >= 8);
    const avg = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    assert.ok(avg(losses.slice(-3)) < avg(losses.slice(0, 3)) - 0.2, `loss ${losses[0]} -> ${losses.at(-1)}`);
    assert.equal(metrics.filter((m: any) => m.eval_loss !== undefined).length, 2);

    const checkpoints = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/checkpoints`, { key: a.key })).body
      .data;
    const intermediate = checkpoints.filter((c: any) => c.checkpoint_type === 'intermediate');
    assert.equal(intermediate.length, 2, 'n_checkpoints = 2, the last on the last epoch');
    assert.deepEqual(
      intermediate.map((c: any) => c.path),
      intermediate.map((c: any) => `${completedId}:${c.step}`),
    );
    assert.ok(intermediate[0].step < intermediate[1].step);
    const final = checkpoints.find((c: any) => c.checkpoint_type === 'final');
    assert.equal(final.path, completedId);
    assert.equal(final.step, intermediate[1].step);
    assert.deepEqual(final.files.sort(), ['adapter.safetensors', 'config.json', 'model.safetensors']);
    const adapter = readSafetensorsHeader(p.blobs.localPath(`fine-tunes/${completedId}/final/adapter.safetensors`));
    assert.deepEqual(adapter['layers.0.q_proj.lora_A'].shape, [64, 8]);
  });

  test('weights download as .tar.zst: merged by default for LoRA, the adapter, or one checkpoint', async () => {
    const download = async (query: string, key = a.key) =>
      fetch(`${p.baseUrl}/v1/finetune/download?${query}`, { headers: { authorization: `Bearer ${key}` } });

    const merged = await download(`ft_id=${completedId}`);
    assert.equal(merged.status, 200);
    assert.equal(merged.headers.get('content-type'), 'application/zstd');
    assert.match(merged.headers.get('content-disposition') ?? '', /reference-byte-tiny-adder-.*\.tar\.zst/);
    const mergedFiles = await extractTarZst(Buffer.from(await merged.arrayBuffer()));
    assert.deepEqual([...mergedFiles.keys()], ['model.safetensors', 'config.json']);
    const model = safetensorsTable(mergedFiles.get('model.safetensors')!);
    assert.deepEqual(model['embed'].shape, [260, 64]);
    assert.ok(!Object.keys(model).some((k) => k.includes('lora')));
    assert.equal(JSON.parse(mergedFiles.get('config.json')!.toString()).training_type, 'lora');

    const adapter = await extractTarZst(
      Buffer.from(await (await download(`ft_id=${completedId}&checkpoint=adapter`)).arrayBuffer()),
    );
    assert.deepEqual([...adapter.keys()], ['adapter.safetensors', 'config.json']);
    assert.deepEqual(safetensorsTable(adapter.get('adapter.safetensors')!)['layers.1.v_proj.lora_B'].shape, [8, 64]);

    const checkpoints = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/checkpoints`, { key: a.key })).body
      .data;
    const first = checkpoints.find((c: any) => c.checkpoint_type === 'intermediate');
    const step = await extractTarZst(
      Buffer.from(await (await download(`ft_id=${encodeURIComponent(first.path)}`)).arrayBuffer()),
    );
    assert.ok(step.has('adapter.safetensors') && !step.has('optimizer.safetensors'), [...step.keys()].join(','));

    const missing = await download(`ft_id=${completedId}&checkpoint_step=99999`);
    assert.equal(missing.status, 404);
    assert.match(((await missing.json()) as any).error.message, /no checkpoint at step 99999/);
    assert.equal((await download(`ft_id=${completedId}`, b.key)).status, 404);
  });

  test('the tokenized dataset: an event names the download; a pre-signed URL serves the archive', async () => {
    const done = await job(completedId);
    const event = done.body.events.find((e: any) => e.type === 'tokenized_dataset_upload_complete');
    assert.match(event.message, new RegExp(`/v1/fine-tunes/${completedId}/download-tokenized-dataset`));
    const res = await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/download-tokenized-dataset`, {
      key: a.key,
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.content_type, 'application/zstd');
    const archive = await fetch(res.body.url); // no API key: the URL carries its signature
    assert.equal(archive.status, 200);
    assert.equal(archive.headers.get('content-type'), 'application/zstd');
    const files = await extractTarZst(Buffer.from(await archive.arrayBuffer()));
    assert.deepEqual([...files.keys()], ['train.jsonl', 'validation.jsonl']);
    const firstRow = JSON.parse(files.get('train.jsonl')!.toString().split('\n')[0]);
    assert.equal(firstRow.input_ids.length, firstRow.loss_mask.length);
    assert.equal(firstRow.input_ids[0], 1, 'rows start with BOS');
    const tampered = new URL(res.body.url);
    tampered.searchParams.set('expires', String(Number(tampered.searchParams.get('expires')) + 1));
    assert.equal((await fetch(tampered)).status, 403);
    // Without the archive (never built, or removed) the answer is 404.
    await p.blobs.delete(`fine-tunes/${completedId}/tokenized-dataset.tar.zst`);
    const gone = await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/download-tokenized-dataset`, {
      key: a.key,
    });
    assert.equal(gone.status, 404);
  });

  test('jobs are listed newest first; another project sees none of them', async () => {
    const list = await call(p.baseUrl, 'GET', '/v1/fine-tunes', { key: a.key });
    assert.equal(list.body.data[0].id, completedId);
    assert.equal(list.body.data[0].events, undefined, 'the list does not carry events');
    assert.equal((await job(completedId, b.key)).status, 404);
    for (const suffix of ['/events', '/metrics', '/checkpoints']) {
      assert.equal(
        (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}${suffix}`, { key: b.key })).status,
        404,
      );
    }
    assert.equal((await call(p.baseUrl, 'POST', `/v1/fine-tunes/${completedId}/cancel`, { key: b.key })).status, 404);
    assert.deepEqual((await call(p.baseUrl, 'GET', '/v1/fine-tunes', { key: b.key })).body.data, []);
    // Another project's file cannot be trained on either.
    const theirs = await create(b.key, { model: MODEL, training_file: trainingFile });
    assert.equal(theirs.status, 400);
    assert.equal(theirs.body.error.param, 'training_file');
  });

  test('cancel stops training: no more steps, status cancelled', async () => {
    const res = await create(a.key, {
      model: MODEL,
      training_file: trainingFile,
      n_epochs: 20,
      n_checkpoints: 1,
      learning_rate: 0.001,
      batch_size: 1,
      max_seq_length: 64,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const id = res.body.id;
    await eventually(
      () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key }),
      (r) => r.body.metrics.length >= 3,
      60_000,
    );
    const cancelled = await call(p.baseUrl, 'POST', `/v1/fine-tunes/${id}/cancel`, { key: a.key });
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, 'cancel_requested');
    const done = await finished(id);
    assert.equal(done.body.status, 'cancelled');
    const steps = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics.length;
    assert.ok(steps < 64 * 20, 'stopped long before the planned steps');
    await new Promise((r) => setTimeout(r, 1500));
    const later = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics.length;
    assert.equal(later, steps, 'no steps after cancellation');
    const types = done.body.events.map((e: any) => e.type);
    assert.ok(types.includes('cancel_requested') && types.at(-1) === 'job_stopped', types.join(','));
    const again = await call(p.baseUrl, 'POST', `/v1/fine-tunes/${id}/cancel`, { key: a.key });
    assert.equal(again.status, 409);
  });

  test('every create rule is a 400 naming its parameter', async () => {
    const ok = { model: MODEL, training_file: trainingFile };
    const cases: Array<[object, string, RegExp]> = [
      [{ training_file: trainingFile }, 'model', /model/],
      [{ ...ok, model: 'meta-llama/not-here' }, 'model', /Unknown base model/],
      [{ ...ok, from_checkpoint: 'ft-x:10' }, 'from_checkpoint', /either 'model' or 'from_checkpoint'/],
      [{ ...ok, training_file: 'file-nope' }, 'training_file', /not found/],
      [{ ...ok, n_epochs: 2, n_checkpoints: 3 }, 'n_checkpoints', /may not exceed n_epochs/],
      [{ ...ok, n_epochs: 21 }, 'n_epochs', /at most 20/],
      [{ ...ok, n_evals: 2 }, 'validation_file', /required when n_evals > 0/],
      [{ ...ok, learning_rate: 0.5 }, 'learning_rate', /between/],
      [{ ...ok, batch_size: 64 }, 'batch_size', /between 1 and 32/],
      [{ ...ok, suffix: 'x'.repeat(41) }, 'suffix', /40 characters/],
      [{ ...ok, packing: false }, 'max_seq_length', /required when packing is off/],
      [{ ...ok, max_seq_length: 4096 }, 'max_seq_length', /between 16 and 256/],
      [{ ...ok, training_type: { type: 'Lora', lora_r: 128 } }, 'training_type.lora_r', /at most 64/],
      [
        { ...ok, training_type: { type: 'Lora', lora_trainable_modules: 'gate_proj' } },
        'training_type.lora_trainable_modules',
        /gate_proj/,
      ],
      [{ ...ok, training_method: { method: 'dpo' } }, 'training_method.method', /preference dataset/],
      [
        {
          ...ok,
          validation_file: validationFile,
          n_evals: 2,
          early_stopping_enabled: true,
          early_stopping_patience: 2,
        },
        'n_evals',
        /n_evals >= .* = 3/,
      ],
      [{ ...ok, wandb_api_key: 'k' }, 'wandb_api_key', /not available/],
    ];
    for (const [body, param, message] of cases) {
      const res = await create(a.key, body);
      assert.equal(res.status, 400, `${param}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error.param, param);
      assert.match(res.body.error.message, message);
    }
  });

  test('the tokenization preview shows tokens, trained spans and the auto rule', async () => {
    const res = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: a.key,
      json: { model: MODEL, training_file: trainingFile, top_k: 2 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.dataset_format, 'conversation');
    assert.equal(res.body.train_on_inputs, false, 'auto masks the inputs of conversations');
    assert.equal(res.body.rows.length, 2);
    const [row] = res.body.rows;
    assert.equal(row.row_index, 1);
    assert.equal(row.tokens.slice(1, 7).join(''), 'user: ');
    assert.equal(row.tokens[0], '<s>');
    // Trained spans cover exactly the labelled positions.
    const labelled = row.labels.flatMap((l: number, i: number) => (l === -100 ? [] : [i]));
    const spanned = row.trained_spans.flatMap(([s, e]: number[]) => Array.from({ length: e - s }, (_, k) => s + k));
    assert.deepEqual(spanned, labelled);
    assert.equal(row.num_trained_tokens, labelled.length);
    const trainedText = Buffer.from(
      row.input_ids
        .filter((_: number, i: number) => row.labels[i] !== -100 && row.input_ids[i] >= 4)
        .map((id: number) => id - 4),
    ).toString();
    assert.equal(trainedText, 'assistant: 0 + 2 = 2.\n');
    const all = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: a.key,
      json: { model: MODEL, training_file: trainingFile, top_k: 1, train_on_inputs: true },
    });
    assert.equal(all.body.rows[0].num_trained_tokens, all.body.rows[0].num_tokens - 1, 'everything but BOS');
    const tooMany = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: a.key,
      json: { model: MODEL, training_file: trainingFile, top_k: 51 },
    });
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.body.error.param, 'top_k');
  });

  test('delete: refused while running (unless forced), then the job and its files are gone', async () => {
    const running = await create(a.key, {
      model: MODEL,
      training_file: trainingFile,
      n_epochs: 20,
      learning_rate: 0.001,
      batch_size: 1,
      max_seq_length: 64,
    });
    const refused = await call(p.baseUrl, 'DELETE', `/v1/fine-tunes/${running.body.id}`, { key: a.key });
    assert.equal(refused.status, 409);
    const forced = await call(p.baseUrl, 'DELETE', `/v1/fine-tunes/${running.body.id}?force=true`, { key: a.key });
    assert.equal(forced.status, 200);
    assert.equal((await job(running.body.id)).status, 404);

    assert.equal((await call(p.baseUrl, 'DELETE', `/v1/fine-tunes/${completedId}`, { key: b.key })).status, 404);
    const res = await call(p.baseUrl, 'DELETE', `/v1/fine-tunes/${completedId}`, { key: a.key });
    assert.equal(res.status, 200);
    assert.equal((await job(completedId)).status, 404);
    assert.equal(await p.blobs.size(`fine-tunes/${completedId}/final/model.safetensors`), null);
    // The training file is free again.
    const del = await call(p.baseUrl, 'DELETE', `/v1/files/${trainingFile}`, { key: a.key });
    assert.equal(del.status, 200, JSON.stringify(del.body));
  });

  test('model limits are served per base model', async () => {
    const res = await call(p.baseUrl, 'GET', `/v1/fine-tunes/models/limits?model_name=${encodeURIComponent(MODEL)}`, {
      key: a.key,
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.model_name, MODEL);
    assert.equal(res.body.lora_training.max_rank, 64);
    assert.equal(
      (await call(p.baseUrl, 'GET', '/v1/fine-tunes/models/limits?model_name=nope', { key: a.key })).status,
      404,
    );
  });
});
