/**
 * The official Python CLI and SDK (PyPI `together`, pinned) against a real stack, as a new user
 * runs them: identity, projects, files with the CLI's own upload flow, and fine-tuning from
 * create to download, cancel and delete. Every command must exit 0 and print what a user expects.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { extractTarZst, safetensorsTable } from '../helpers/archives';
import { chat, jsonl } from '../helpers/datasets';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { pythonSdk, together, togetherJson, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let cli: PythonClient;
const work = mkdtempSync(path.join(tmpdir(), 'gantry-python-cli-'));
const trainPath = path.join(work, 'train.jsonl');
const evalPath = path.join(work, 'eval.jsonl');
let trainId: string;
let evalId: string;
let jobId: string;

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  cli = { baseUrl: p.baseUrl, key: t.key, cwd: work };
  const records = Array.from({ length: 24 }, (_, i) => chat(`What is ${i} plus ${i}?`, `${2 * i}.`));
  writeFileSync(trainPath, jsonl(...records));
  writeFileSync(evalPath, jsonl(...records.slice(0, 6)));
});
after(() => p.stop());

/** `fine-tuning create` of the reference model on the training file, confirmed (-y), with `options`. */
const createJob = (...options: string[]) =>
  together(
    cli,
    'fine-tuning',
    'create',
    '--model',
    'gantry/reference-byte-tiny',
    '--training-file',
    trainId,
    ...options,
    '-y',
  );
const jobIdIn = (out: string) => /Fine-tuning job has been submitted\. \((ft-[0-9a-f-]+)\)/.exec(out)?.[1];

test('whoami: the key, its project and its organization', async () => {
  const out = await together(cli, 'whoami');
  assert.match(out, new RegExp(`API key: ${t.keyId}`));
  assert.match(out, new RegExp(`Project: Project [0-9a-f]+ \\(${t.projectId}\\)`));
  assert.match(out, new RegExp(`Organization: Org [0-9a-f]+ \\(${t.organizationId}\\)`));
});

test('projects list: the project, its slug and organization name', async () => {
  const projects = (await togetherJson(cli, 'projects', 'list')).data;
  const mine = projects.find((x: any) => x.id === t.projectId);
  assert.ok(mine, JSON.stringify(projects));
  assert.equal(mine.slug, t.projectSlug);
  assert.match(mine.organization_name, /^Org /);
  assert.match(await together(cli, 'projects', 'list'), /\(current\)/);
});

test('files: check, upload (its own flow), the same bytes again, list, retrieve, download', async () => {
  assert.match(await together(cli, 'files', 'check', trainPath), /Checks passed/);
  const uploaded = await together(cli, 'files', 'upload', trainPath);
  assert.match(uploaded, /Success!/);
  trainId = /(file-[0-9a-f-]+)/.exec(uploaded)![1];

  const again = await together(cli, 'files', 'upload', trainPath);
  assert.match(again, new RegExp(`File already exists under ID: ${trainId}`), 'a second upload of the same bytes');

  evalId = (await togetherJson(cli, 'files', 'upload', evalPath)).id;
  const listed = await togetherJson(cli, 'files', 'list');
  assert.deepEqual(listed.map((f: any) => f.id).sort(), [trainId, evalId].sort());

  const file = await eventually(
    () => togetherJson(cli, 'files', 'retrieve', trainId),
    (f) => f.processing_status === 'COMPLETED',
  );
  assert.equal(file.filename, 'train.jsonl');
  assert.equal(file.bytes, readFileSync(trainPath).length);

  const saved = path.join(work, 'downloaded.jsonl');
  assert.match(await together(cli, 'files', 'download', trainId, '--output', saved), /File saved to/);
  assert.deepEqual(readFileSync(saved), readFileSync(trainPath));
});

test('fine-tuning create with defaults: runs to completion; list, retrieve, events, checkpoints, metrics', async () => {
  const created = await createJob('--lora');
  jobId = jobIdIn(created)!;
  assert.ok(jobId, created);

  const done = await eventually(
    () => togetherJson(cli, 'fine-tuning', 'retrieve', jobId),
    (j) => ['completed', 'error', 'cancelled'].includes(j.status),
    120_000,
  );
  assert.equal(done.status, 'completed', JSON.stringify(done.events?.slice(-3)));
  assert.equal(done.training_type.type, 'Lora');
  assert.ok(done.total_price > 0, `charged: ${done.total_price} nanodollars`);

  const listed = await togetherJson(cli, 'fine-tuning', 'list');
  assert.ok(listed.some((j: any) => j.id === jobId));
  assert.match(await together(cli, 'fine-tuning', 'list'), new RegExp(jobId));

  const events = await together(cli, 'fine-tuning', 'list-events', jobId);
  assert.match(events, /job_start/);
  assert.match(events, /Training started/);

  const checkpoints = await together(cli, 'fine-tuning', 'list-checkpoints', jobId);
  assert.match(checkpoints, new RegExp(`${jobId}: \\S+-adapter`), 'the adapter is a registry artifact');

  const metrics = await togetherJson(cli, 'fine-tuning', 'list-metrics', jobId);
  assert.ok(metrics.length >= 1);
  for (const m of metrics) assert.equal(typeof m['train/loss'], 'number');
  // The chart a user sees: drawn from the same rows, by step.
  assert.doesNotMatch(await together(cli, 'fine-tuning', 'list-metrics', jobId), /No metrics found/);
});

test('fine-tuning download: merged and adapter weights, probed with Range, saved whole', async () => {
  const merged = path.join(work, 'merged.tar.zst');
  assert.match(await together(cli, 'fine-tuning', 'download', jobId, '--output-dir', merged), /File saved to/);
  const mergedFiles = await extractTarZst(readFileSync(merged));
  assert.deepEqual([...mergedFiles.keys()].sort(), ['config.json', 'model.safetensors']);
  assert.ok(Object.keys(safetensorsTable(mergedFiles.get('model.safetensors')!)).length > 0);

  const adapter = path.join(work, 'adapter.tar.zst');
  await together(cli, 'fine-tuning', 'download', jobId, '--output-dir', adapter, '--checkpoint-type', 'adapter');
  const adapterFiles = await extractTarZst(readFileSync(adapter));
  assert.deepEqual([...adapterFiles.keys()].sort(), ['adapter.safetensors', 'config.json']);

  // The same download twice is the same bytes: the size the CLI probed first still holds.
  const again = path.join(work, 'adapter-again.tar.zst');
  await together(cli, 'fine-tuning', 'download', jobId, '--output-dir', again, '--checkpoint-type', 'adapter');
  const digest = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');
  assert.equal(digest(again), digest(adapter));
});

test('fine-tuning create with options (validation, evals, epochs, rank, suffix), then cancel and delete', async () => {
  const created = await createJob(
    '--validation-file',
    evalId,
    '--n-evals',
    '2',
    '--n-epochs',
    '20',
    '--n-checkpoints',
    '2',
    '--learning-rate',
    '0.0005',
    '--lora',
    '--lora-r',
    '16',
    '--lora-alpha',
    '32',
    '--suffix',
    'py-cli',
  );
  const id = jobIdIn(created)!;
  const job = await togetherJson(cli, 'fine-tuning', 'retrieve', id);
  assert.equal(job.validation_file, evalId);
  assert.equal(job.n_evals, 2);
  assert.equal(job.n_epochs, 20);
  assert.equal(job.learning_rate, 0.0005);
  assert.equal(job.training_type.lora_r, 16);
  assert.equal(job.training_type.lora_alpha, 32);
  assert.equal(job.suffix, 'py-cli');

  assert.match(await together(cli, 'fine-tuning', 'cancel', id), /cancel/i);
  const cancelled = await eventually(
    () => togetherJson(cli, 'fine-tuning', 'retrieve', id),
    (j) => j.status === 'cancelled',
    60_000,
  );
  assert.equal(cancelled.status, 'cancelled');
  assert.match(await together(cli, 'fine-tuning', 'delete', id, '--force'), /Deleted fine-tuning job/);
  const listed = await togetherJson(cli, 'fine-tuning', 'list');
  assert.ok(!listed.some((j: any) => j.id === id), 'gone from the list');
});

test('the SDK in-process: whoami, files, fine-tuning and its metrics', async () => {
  const seen = await pythonSdk(
    cli,
    `
import json
from together import Together
client = Together()
me = client.whoami()
files = client.files.list()
jobs = client.fine_tuning.list()
job = client.fine_tuning.retrieve(${JSON.stringify(jobId)})
metrics = client.fine_tuning.list_metrics(${JSON.stringify(jobId)})
events = client.fine_tuning.list_events(${JSON.stringify(jobId)})
print(json.dumps({
  "type": me.type, "project": me.project.id, "slug": me.project.slug,
  "files": sorted(f.id for f in files.data),
  "jobs": [j.id for j in jobs.data],
  "status": job.status, "output": job.x_model_output_name,
  "steps": [m["train/global_step"] for m in metrics.metrics],
  "events": [e.type for e in events.data],
}))
`,
  );
  assert.equal(seen.type, 'project_api_key');
  assert.equal(seen.project, t.projectId);
  assert.equal(seen.slug, t.projectSlug);
  assert.deepEqual(seen.files, [trainId, evalId].sort());
  assert.ok(seen.jobs.includes(jobId));
  assert.equal(seen.status, 'completed');
  assert.match(seen.output, new RegExp(`^${t.projectSlug}/`));
  assert.ok(seen.steps.length >= 1);
  assert.ok(seen.events.includes('job_start'));
});

test('files delete: the CLI removes the file', async () => {
  await togetherJson(cli, 'files', 'delete', evalId);
  const listed = await togetherJson(cli, 'files', 'list');
  assert.ok(!listed.some((f: any) => f.id === evalId));
});
