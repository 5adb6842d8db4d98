/**
 * Fine-tuning jobs through the API: a job trains the reference model to
 * completion on the GPU queue's worker (simulated host, CPU trainer), with
 * events, metrics, checkpoints and weights; cancel stops it; the create rules
 * name their parameter; another project sees nothing.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { readSafetensorsHeader } from '../../providers/trainer/safetensors';
import { extractTarZst, safetensorsTable } from '../helpers/archives';
import { chat, jsonl } from '../helpers/datasets';
import { requestFineTuneCancel, updateFineTune } from '../../db/fine-tunes';
import { fineTuneWorkflowId } from '../../shared/fine-tunes';
import {
  call,
  eventually,
  startApiWithoutTemporal,
  startTestPlatform,
  uploadValidated,
  type TestPlatform,
} from '../helpers/platform';
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
    // Epochs end as training goes; their events interleave with checkpoint uploads.
    const epochs = done.body.events.filter((e: any) => e.type === 'epoch_complete');
    assert.deepEqual(
      epochs.map((e: any) => e.message.replace(/ at step \d+/, '')),
      [1, 2, 3, 4].map((n) => `Epoch ${n} completed.`),
    );
    const types = done.body.events.map((e: any) => e.type).filter((t: string) => t !== 'epoch_complete');
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
      'model_upload_complete', // registered in the model registry
      'job_complete',
    ]);

    const metrics = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/metrics`, { key: a.key })).body
      .metrics;
    const losses = metrics.filter((m: any) => m['train/loss'] !== undefined).map((m: any) => m['train/loss']);
    assert.ok(losses.length >= 8);
    const avg = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    assert.ok(avg(losses.slice(-3)) < avg(losses.slice(0, 3)) - 0.2, `loss ${losses[0]} -> ${losses.at(-1)}`);
    assert.equal(metrics.filter((m: any) => m['eval/loss'] !== undefined).length, 2);

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

  test('a completed job is in the model registry: model, adapter and checkpoints, named by project slug', async () => {
    const done = (await job(completedId)).body;
    const name = done.model_output_name as string;
    assert.match(done.model_object_id, /^ml_/);
    assert.match(done.model_object_revision_id, /^rv_/);
    assert.equal(done.model_object_name, name);
    assert.match(done.adapter_object_id, /^ml_/);
    assert.notEqual(done.adapter_object_id, done.model_object_id);
    assert.equal(done.adapter_object_name, `${name}-adapter`);
    assert.ok(done.events.some((e: any) => e.message.includes(`Registered ${name} (${done.model_object_id}`)));

    // The list carries the ids but not the resolved names.
    const listed = (await call(p.baseUrl, 'GET', '/v1/fine-tunes', { key: a.key })).body.data.find(
      (j: any) => j.id === completedId,
    );
    assert.equal(listed.model_object_id, done.model_object_id);
    assert.equal(listed.model_object_name, undefined);

    const checkpoints = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${completedId}/checkpoints`, { key: a.key })).body
      .data;
    for (const c of checkpoints.filter((c: any) => c.checkpoint_type === 'intermediate')) {
      assert.equal(c.object_name, `${name}-${c.step}`);
      assert.match(c.object_id, /^ml_/);
    }
    const finals = checkpoints.filter((c: any) => c.checkpoint_type === 'final');
    assert.deepEqual(
      finals.map((c: any) => [c.checkpoint, c.object_id, c.object_name]),
      [
        ['model', done.model_object_id, name],
        ['adapter', done.adapter_object_id, `${name}-adapter`],
      ],
    );

    // The registry owns a copy of the weights, byte for byte, and counted their parameters.
    const rev = await p.db.query(
      `SELECT r.blob_prefix, f.size_bytes, f.sha256, m.parameters_total, m.weights_type
       FROM registry_model_revisions r JOIN registry_model_files f ON f.revision_id = r.id
       JOIN registry_models m ON m.id = r.model_id WHERE r.id = $1 AND f.path = 'model.safetensors'`,
      [done.model_object_revision_id],
    );
    assert.equal(rev.rows[0].weights_type, 'WEIGHTS_TYPE_DEFAULT');
    const original = readFileSync(p.blobs.localPath(`fine-tunes/${completedId}/final/model.safetensors`));
    assert.equal(Number(rev.rows[0].size_bytes), original.length);
    assert.equal(rev.rows[0].sha256, createHash('sha256').update(original).digest('hex'));
    const tensors = Object.values(
      readSafetensorsHeader(p.blobs.localPath(`fine-tunes/${completedId}/final/model.safetensors`)),
    );
    assert.equal(
      Number(rev.rows[0].parameters_total),
      tensors.reduce((n, t) => n + t.shape.reduce((x, y) => x * y, 1), 0),
    );

    // And the registry's API shows it: the model, its parameters, its files with their hashes.
    const models = `/v2/projects/${a.projectId}/models`;
    const model = (await call(p.baseUrl, 'GET', `${models}/${done.model_object_id}`, { key: a.key })).body;
    assert.equal(model.name, name);
    assert.equal(model.weights.parameters.total, String(rev.rows[0].parameters_total));
    const files = (await call(p.baseUrl, 'GET', `${models}/${done.model_object_id}/files`, { key: a.key })).body;
    assert.equal(files.revisionId, done.model_object_revision_id);
    assert.ok(files.data.some((f: any) => f.path === 'model.safetensors' && f.hash === `sha256:${rev.rows[0].sha256}`));
  });

  test('from_checkpoint continues a previous job: same base and adapter, a lower starting loss', async () => {
    const base = { training_file: trainingFile, n_epochs: 1, learning_rate: 0.01, batch_size: 8, max_seq_length: 64 };
    const both = await create(a.key, { ...base, model: MODEL, from_checkpoint: completedId });
    assert.equal(both.status, 400);
    assert.equal(both.body.error.param, 'from_checkpoint');
    const badStep = await create(a.key, { ...base, from_checkpoint: `${completedId}:99999` });
    assert.equal(badStep.status, 400);
    assert.match(badStep.body.error.message, /no checkpoint at step 99999/);
    const otherType = await create(a.key, { ...base, from_checkpoint: completedId, training_type: { type: 'Full' } });
    assert.equal(otherType.status, 400);
    assert.equal(otherType.body.error.param, 'training_type.type');
    assert.equal((await create(b.key, { ...base, from_checkpoint: completedId })).status, 400, "another project's job");

    const source = (await job(completedId)).body;
    const res = await create(a.key, { ...base, from_checkpoint: source.model_output_name });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.model, MODEL);
    assert.equal(res.body.from_checkpoint, source.model_output_name);
    assert.equal(res.body.training_type.type, 'Lora');
    assert.equal(res.body.training_type.lora_r, 8);
    const done = await finished(res.body.id);
    assert.equal(done.body.status, 'completed', JSON.stringify(done.body.events?.slice(-3)));
    assert.ok(done.body.events.some((e: any) => e.type === 'model_download_complete'));

    const firstLoss = async (id: string) =>
      (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics.find(
        (m: any) => m['train/loss'] !== undefined,
      )['train/loss'];
    const fresh = await firstLoss(completedId);
    const continued = await firstLoss(res.body.id);
    assert.ok(continued < fresh - 0.2, `first loss: fresh ${fresh}, continued ${continued}`);
  });

  test('estimate-price: billed tokens from the tokenizer, epochs and evals, the no-packing rule, credit', async () => {
    const texts = ['short', 'a somewhat longer sample of text', 'Grüße aus Köln'];
    const textFile = await uploadValidated(p, a.key, 'texts.jsonl', jsonl(...texts.map((text) => ({ text }))));
    const evalFile = await uploadValidated(p, a.key, 'texts-eval.jsonl', jsonl({ text: 'held out' }));
    const estimate = (json: object) => call(p.baseUrl, 'POST', '/v1/fine-tunes/estimate-price', { key: a.key, json });
    // The reference tokenizer is byte-level: a sample is its UTF-8 bytes plus BOS and EOS.
    const perEpoch = texts.reduce((n, t) => n + Buffer.byteLength(t) + 2, 0);
    const packed = await estimate({
      model: MODEL,
      training_file: textFile,
      validation_file: evalFile,
      n_epochs: 3,
      n_evals: 2,
    });
    assert.equal(packed.status, 200, JSON.stringify(packed.body));
    assert.equal(packed.body.estimation_available, true);
    assert.equal(packed.body.estimated_train_token_count, perEpoch * 3);
    assert.equal(packed.body.estimated_eval_token_count, (Buffer.byteLength('held out') + 2) * 2);
    const tokens = perEpoch * 3 + (Buffer.byteLength('held out') + 2) * 2;
    assert.equal(packed.body.estimated_total_price, Number(((tokens * 0.48) / 1e6).toFixed(6)));
    // The organization's credit (100) less what its jobs were charged so far.
    const { rows: charged } = await p.db.query<{ sum: string | null }>(
      'SELECT sum(amount) FROM usage_records WHERE organization_id = $1',
      [a.organizationId],
    );
    const spent = Number(charged[0].sum ?? 0);
    assert.ok(spent > 0, 'the completed job was charged');
    assert.equal(packed.body.user_limit, 100 - spent);
    assert.equal(packed.body.allowed_to_proceed, true);

    const unpacked = await estimate({ model: MODEL, training_file: textFile, packing: false, max_seq_length: 128 });
    assert.equal(unpacked.body.estimated_train_token_count, texts.length * 128, 'each sample fills a padded row');

    const llama = await estimate({ model: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference', training_file: textFile });
    assert.equal(llama.status, 200, JSON.stringify(llama.body));
    assert.ok(llama.body.estimated_train_token_count < perEpoch, 'BPE needs fewer tokens than bytes');

    await p.db.query('UPDATE organizations SET credit_limit = 0 WHERE id = $1', [a.organizationId]);
    const broke = await estimate({ model: MODEL, training_file: textFile });
    assert.equal(broke.body.allowed_to_proceed, false);
    assert.equal(broke.body.user_limit, -spent);
    await p.db.query('UPDATE organizations SET credit_limit = 100 WHERE id = $1', [a.organizationId]);

    assert.equal((await estimate({ model: MODEL, training_file: textFile, n_epochs: 0 })).body.error.param, 'n_epochs');
  });

  test('a real family tokenizes with its own tokenizer; without its weights on the host the job fails and says why', async () => {
    const res = await create(a.key, {
      model: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference',
      training_file: trainingFile,
      max_seq_length: 1024,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const done = await finished(res.body.id);
    assert.equal(done.body.status, 'error');
    // ./dev sets up the PyTorch trainer, but no registry this installation reaches has Llama's weights.
    assert.match(
      done.body.error,
      /base weights of meta-llama\/Llama-3\.1-8B-Instruct are not installed in the model directory|needs the torch trainer, which this GPU worker does not have/,
    );
    assert.ok(done.body.token_count > 0);
    const preview = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: a.key,
      json: { model: 'meta-llama/Meta-Llama-3.1-8B-Instruct-Reference', training_file: trainingFile, top_k: 1 },
    });
    assert.deepEqual(preview.body.rows[0].tokens.slice(0, 4), [
      '<|begin_of_text|>',
      '<|start_header_id|>',
      'user',
      '<|end_header_id|>',
    ]);
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

  test('a job whose workflow cannot start is a 503 that leaves nothing: no job, and its files stay deletable', async () => {
    const file = await uploadValidated(p, a.key, 'unstarted.jsonl', jsonl(chat('1 + 1?', '2.'), chat('2 + 2?', '4.')));
    // The row is written, the start fails.
    const api = await startApiWithoutTemporal(p);
    try {
      const res = await call(api.baseUrl, 'POST', '/v1/fine-tunes', {
        key: a.key,
        json: { model: MODEL, training_file: file, n_epochs: 1, batch_size: 8, max_seq_length: 64 },
      });
      assert.equal(res.status, 503, JSON.stringify(res.body));
    } finally {
      api.close();
    }
    const jobs = await call(p.baseUrl, 'GET', '/v1/fine-tunes', { key: a.key });
    assert.ok(!jobs.body.data.some((j: { training_file: string }) => j.training_file === file), 'no job is left');
    // The job held a lease on its training file while it existed; none is left behind.
    const deleted = await call(p.baseUrl, 'DELETE', `/v1/files/${file}`, { key: a.key });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));
  });

  test('jobs are listed newest first; another project sees none of them', async () => {
    const list = await call(p.baseUrl, 'GET', '/v1/fine-tunes', { key: a.key });
    assert.ok(list.body.data.length >= 3);
    const created = list.body.data.map((j: any) => Date.parse(j.created_at));
    assert.deepEqual(
      created,
      [...created].sort((x, y) => y - x),
    );
    assert.equal(list.body.data.at(-1).id, completedId, "the project's first job comes last");
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

  /** The pid of a job's trainer: a Python process whose command line names the job's run directory. */
  const trainerOf = (jobId: string) =>
    readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .find((pid) => {
        try {
          const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
          return cmdline.includes('gantry_trainer') && cmdline.includes(jobId);
        } catch {
          return false; // it ended while we looked
        }
      });
  /** Whether a process has ended (gone, or a zombie its parent has yet to reap). */
  const ended = (pid: string) => {
    try {
      return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].startsWith('Z');
    } catch {
      return true;
    }
  };

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
    const trainer = trainerOf(id);
    assert.ok(trainer, 'the trainer process of the job, while it trains');
    const cancelled = await call(p.baseUrl, 'POST', `/v1/fine-tunes/${id}/cancel`, { key: a.key });
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.status, 'cancel_requested');
    const done = await finished(id);
    assert.equal(done.body.status, 'cancelled');
    const steps = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics.length;
    assert.ok(steps < 64 * 20, 'stopped long before the planned steps');
    // The training activity confirmed its cancellation before the run ended, and the trainer it ran
    // has exited: from then on nothing is left that could record a step.
    const history = await p.temporal.workflow.getHandle(fineTuneWorkflowId(id)).fetchHistory();
    assert.ok(
      history.events!.some((e) => e.activityTaskCanceledEventAttributes),
      'the training activity confirmed its cancellation',
    );
    assert.ok(ended(trainer), `the trainer (pid ${trainer}) has exited`);
    const later = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}/metrics`, { key: a.key })).body.metrics.length;
    assert.equal(later, steps, 'no steps after cancellation');
    const types = done.body.events.map((e: any) => e.type);
    assert.ok(types.includes('cancel_requested') && types.at(-1) === 'job_stopped', types.join(','));
    const again = await call(p.baseUrl, 'POST', `/v1/fine-tunes/${id}/cancel`, { key: a.key });
    assert.equal(again.status, 409);
  });

  test('status writes of the workflow and of cancel, in either order, never undo how a job ended', async () => {
    const res = await create(a.key, { model: MODEL, training_file: trainingFile, n_epochs: 1 });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const done = await finished(res.body.id);
    assert.equal(done.body.status, 'completed');
    const status = async (id: string) =>
      (await p.db.query<{ status: string }>('SELECT status FROM fine_tunes WHERE id = $1', [id])).rows[0].status;
    // A cancel whose write lands after the job completed: refused, and the job stays completed.
    assert.equal(await requestFineTuneCancel(p.db, res.body.id), false);
    // A late write of the workflow (a retried record) does not reopen it either.
    await updateFineTune(p.db, res.body.id, { status: 'running' });
    assert.equal(await status(res.body.id), 'completed');

    // A running job (a copy of the row): cancel lands, then a late 'running' write of the workflow
    // keeps cancel_requested, and only how it ended replaces it.
    const copy = `${res.body.id}-copy`;
    await p.db.query(
      `INSERT INTO fine_tunes SELECT (jsonb_populate_record(NULL::fine_tunes,
         to_jsonb(f) || jsonb_build_object('id', $2::text, 'status', 'running'))).* FROM fine_tunes f WHERE id = $1`,
      [res.body.id, copy],
    );
    assert.equal(await requestFineTuneCancel(p.db, copy), true);
    await updateFineTune(p.db, copy, { status: 'running' });
    assert.equal(await status(copy), 'cancel_requested');
    await updateFineTune(p.db, copy, { status: 'cancelled' });
    assert.equal(await status(copy), 'cancelled');
    await p.db.query('DELETE FROM fine_tunes WHERE id = $1', [copy]);
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
        // patience 2 + the warmup the SDKs document as the server's default (1) + 1
        /n_evals >= .* = 4/,
      ],
      [{ ...ok, wandb_api_key: 'k' }, 'wandb_api_key', /not available/],
      [{ ...ok, train_vision: true }, 'train_vision', /no vision encoder/],
      [{ ...ok, gradient_accumulation_steps: 4 }, 'gradient_accumulation_steps', /one batch per step.*batch_size/],
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

    // A preview reads a file's first 4 MiB (PREVIEW_MAX_BYTES) only: rows past them, or cut by
    // them, are left out, and a first row longer than that is a 400.
    const textOf = (mib: number) => ({ text: 'x'.repeat(mib * 1024 * 1024) });
    const long = await uploadValidated(p, a.key, 'long.jsonl', jsonl(textOf(1.5), textOf(1.5), textOf(1.5)));
    const capped = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: a.key,
      json: { model: MODEL, training_file: long, top_k: 5 },
    });
    assert.equal(capped.status, 200, JSON.stringify(capped.body).slice(0, 500));
    assert.deepEqual(
      capped.body.rows.map((r: { row_index: number }) => r.row_index),
      [1, 2],
    );
    const huge = await uploadValidated(p, a.key, 'huge.jsonl', jsonl(textOf(5)));
    const refused = await call(p.baseUrl, 'POST', '/v1/fine-tunes/preview', {
      key: a.key,
      json: { model: MODEL, training_file: huge, top_k: 1 },
    });
    assert.deepEqual([refused.status, refused.body.error?.param], [400, 'training_file']);
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
    assert.equal(res.body.lora_training.max_rank, 64, 'the tiny reference model: rank up to its width');
    // The spec: LoRA rank up to 128 on most models, with a model default of 64.
    const llama = await call(
      p.baseUrl,
      'GET',
      `/v1/fine-tunes/models/limits?model_name=${encodeURIComponent('meta-llama/Meta-Llama-3.1-8B-Instruct-Reference')}`,
      { key: a.key },
    );
    assert.equal(llama.body.lora_training.max_rank, 128);
    assert.equal(llama.body.lora_training.default_rank, 64);
    assert.equal(
      (await call(p.baseUrl, 'GET', '/v1/fine-tunes/models/limits?model_name=nope', { key: a.key })).status,
      404,
    );
  });
});
