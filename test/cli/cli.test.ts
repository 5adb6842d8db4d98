/**
 * The `gantry` command-line tool, run as a real subprocess (bin/gantry) against
 * a test platform: what a user sees on stdout and stderr, and the exit codes
 * scripts rely on. A fine-tune goes from a local file check to the weights on
 * disk; files, queue jobs, clusters and endpoint deploys go through their
 * commands; API errors come out of the error body with their exit codes.
 */
import assert from 'node:assert/strict';
import Decimal from 'decimal.js';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { newId } from '../../platform/ids';
import { insertDeployment } from '../../db/deployments';
import { deleteAllClusters, FAST_CLUSTERS, NVIDIA_VERSION_ID, REGION } from '../helpers/clusters';
import { chat, jsonl } from '../helpers/datasets';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const BIN = path.resolve(__dirname, '../../bin/gantry');
const MODEL = 'gantry/reference-byte-tiny';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

let p: TestPlatform;
let t: Tenant;
let dir: string;

/** Runs `gantry args...` in the test's directory with the tenant's key (or `key`), without a terminal. */
function gantry(args: string[], opts: { key?: string | null; env?: Record<string, string> } = {}): Promise<Run> {
  const env: Record<string, string> = { ...(process.env as Record<string, string>) };
  delete env.SERVICE_API_KEY;
  delete env.GANTRY_BASE_URL;
  if (opts.key !== null) env.SERVICE_API_KEY = opts.key ?? t.key;
  env.GANTRY_BASE_URL = `${p.baseUrl}/v1`;
  Object.assign(env, opts.env);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** `gantry --json ...`: exit code 0 and exactly one JSON document on stdout. */
async function json(args: string[], opts: { key?: string | null } = {}): Promise<any> {
  const r = await gantry([...args, '--json'], opts);
  assert.equal(r.code, 0, `gantry ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

const write = (name: string, content: string) => {
  writeFileSync(path.join(dir, name), content);
  return name;
};

const records = Array.from({ length: 32 }, (_, i) => chat(`What is ${i} + 2?`, `${i} + 2 = ${i + 2}.`));

before(async () => {
  // Files above 8 KiB go up in 4 KiB parts: the multipart path runs too, on small files.
  p = await startTestPlatform({
    env: { ...FAST_CLUSTERS, GANTRY_MAX_SINGLE_PUT_BYTES: '8192', GANTRY_MULTIPART_PART_BYTES: '4096' },
  });
  t = await createTenant(p.db);
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-cli-'));
});
after(async () => {
  await deleteAllClusters(p, t.key);
  await p.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('gantry: identity, help and errors', () => {
  test('whoami prints a table, and with --json one document with the project and organization', async () => {
    const table = await gantry(['whoami']);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, new RegExp(`Project slug\\s*│ ${t.projectSlug}`));
    assert.match(table.stdout, new RegExp(`Project\\s*│ Project [0-9a-f]+ \\(${t.projectId}\\)`));
    assert.match(table.stdout, /Organization role\s*│ Developer/);
    const doc = await json(['whoami']);
    assert.equal(doc.project_id, t.projectId);
    assert.equal(doc.organization_id, t.organizationId);
    assert.equal(doc.api_key_id, t.keyId);
    // --base-url wins over GANTRY_BASE_URL.
    const viaFlag = await gantry(['--base-url', `${p.baseUrl}/v1`, 'whoami', '--json'], {
      env: { GANTRY_BASE_URL: 'http://127.0.0.1:9/v1' },
    });
    assert.equal(viaFlag.code, 0, viaFlag.stderr);
    assert.equal(JSON.parse(viaFlag.stdout).project_slug, t.projectSlug);
  });

  test('--help documents the environment and the exit codes', async () => {
    const help = await gantry(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /SERVICE_API_KEY/);
    assert.match(help.stdout, /GANTRY_BASE_URL/);
    assert.match(help.stdout, /3 {2}not found \(HTTP 404\)/);
    const create = await gantry(['fine-tuning', 'create', '--help']);
    for (const flag of [
      '--n-epochs',
      '--learning-rate',
      '--lora-r',
      '--train-on-inputs',
      '--no-packing',
      '--from-checkpoint',
      '--dpo-normalize-logratios-by-length',
      '--early-stopping-enabled',
      '--wandb-project-name',
      '--hf-output-repo-name',
      '--confirm',
    ]) {
      assert.ok(create.stdout.includes(flag), `fine-tuning create --help lists ${flag}`);
    }
  });

  test('a bad key is exit code 4 with the API message, status and code; no key is a usage error', async () => {
    const bad = await gantry(['whoami'], { key: 'gk-not-a-key' });
    assert.equal(bad.code, 4);
    assert.equal(bad.stdout, '');
    assert.match(bad.stderr, /^Error: Invalid API key\. \(HTTP 401 authentication_error, code invalid_api_key\)$/m);
    const badJson = await gantry(['whoami', '--json'], { key: 'gk-not-a-key' });
    assert.equal(badJson.code, 4);
    assert.deepEqual(JSON.parse(badJson.stdout).error, {
      message: 'Invalid API key.',
      type: 'authentication_error',
      code: 'invalid_api_key',
      param: null,
      status: 401,
    });
    const none = await gantry(['files', 'list'], { key: null });
    assert.equal(none.code, 2);
    assert.match(none.stderr, /SERVICE_API_KEY is not set/);
  });

  test('unknown jobs are exit code 3; bad flags are exit code 2 before any request', async () => {
    const missing = await gantry(['fine-tuning', 'retrieve', 'ft-does-not-exist']);
    assert.equal(missing.code, 3);
    assert.match(missing.stderr, /Error: Fine-tuning job 'ft-does-not-exist' not found\. \(HTTP 404 not_found_error\)/);
    const range = await gantry([
      'fine-tuning',
      'create',
      '--training-file',
      'file-x',
      '--model',
      MODEL,
      '--n-epochs',
      '21',
    ]);
    assert.equal(range.code, 2);
    assert.match(range.stderr, /--n-epochs <n>' argument '21' is invalid\. must be between 1 and 20/);
    const both = await gantry([
      'fine-tuning',
      'create',
      '--training-file',
      'file-x',
      '--model',
      MODEL,
      '--from-checkpoint',
      'ft-x',
    ]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--model and --from-checkpoint are mutually exclusive/);
    const unreachable = await gantry(['whoami', '--base-url', 'http://127.0.0.1:9/v1']);
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, /Cannot reach the API at http:\/\/127\.0\.0\.1:9/);
  });
});

describe('gantry files', () => {
  const bad = jsonl(...records.slice(0, 3), { text: 5 });

  test('check applies the server rules locally: a bad file is exit code 2 with the reason the server gives', async () => {
    write('bad.jsonl', bad);
    const local = await gantry(['files', 'check', 'bad.jsonl']);
    assert.equal(local.code, 2);
    const reason = /failed the file check: (Line 4: .*)$/m.exec(local.stderr)?.[1];
    assert.ok(reason, local.stderr);
    assert.match(local.stdout, /Valid\s*│ no/);

    // upload refuses it too, and sends nothing.
    const refused = await gantry(['files', 'upload', 'bad.jsonl']);
    assert.equal(refused.code, 2);
    assert.equal((await json(['files', 'list'])).data.length, 0);

    // With the check skipped, the server finds the same line and reason.
    const uploaded = await json(['files', 'upload', 'bad.jsonl', '--no-check']);
    const server = await eventually(
      () => json(['files', 'retrieve', uploaded.id]),
      (f) => f.processing_status === 'INVALID_FORMAT',
    );
    assert.equal(server.validation_report.error, reason);
    const waited = await gantry(['files', 'upload', 'bad.jsonl', '--no-check', '--wait']);
    assert.equal(waited.code, 1);
    assert.match(waited.stderr, /is INVALID_FORMAT: Line 4: /);
  });

  test('upload, list, retrieve, download and delete', async () => {
    write('good.jsonl', jsonl(...records));
    const ok = await gantry(['files', 'check', 'good.jsonl']);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /Format\s*│ CONVERSATION/);
    assert.match(ok.stdout, /good\.jsonl passed the check/);

    const up = await gantry(['files', 'upload', 'good.jsonl', '--wait', '--file-name', 'renamed.jsonl']);
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stdout, /Status\s*│ COMPLETED/);
    assert.match(up.stdout, /File name\s*│ renamed\.jsonl/);
    const id = /ID\s*│ (file-[0-9a-f-]+)/.exec(up.stdout)?.[1];
    assert.ok(id);

    const list = await gantry(['files', 'list']);
    assert.match(list.stdout, new RegExp(`${id}.*renamed\\.jsonl.*fine-tune.*jsonl.*COMPLETED`));
    const one = await json(['files', 'retrieve', id]);
    assert.equal(one.bytes, Buffer.byteLength(jsonl(...records)));
    assert.equal(one.validation_report.nlines, records.length);
    const single = await p.db.query('SELECT 1 FROM file_multipart_uploads WHERE file_id = $1', [id]);
    assert.equal(single.rowCount, 0, 'a small file goes up in one pre-signed PUT');

    const down = await gantry(['files', 'download', id, '-o', 'copy.jsonl']);
    assert.equal(down.code, 0, down.stderr);
    assert.equal(statSync(path.join(dir, 'copy.jsonl')).size, one.bytes);

    // A name chosen by someone else in the project never lands on a dotfile nor replaces a file.
    const dotted = await json(['files', 'upload', 'good.jsonl', '--wait', '--file-name', '.hidden.jsonl']);
    const saved = await gantry(['files', 'download', dotted.id]);
    assert.equal(saved.code, 0, saved.stderr);
    assert.ok(!existsSync(path.join(dir, '.hidden.jsonl')), 'no dotfile written');
    assert.equal(statSync(path.join(dir, 'hidden.jsonl')).size, one.bytes);
    write('hidden.jsonl', 'mine');
    const again = await gantry(['files', 'download', dotted.id]);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /hidden\.jsonl exists here; choose where to write the file with --output/);
    assert.equal(readFileSync(path.join(dir, 'hidden.jsonl'), 'utf8'), 'mine', 'left as it was');

    // A file above the single-PUT limit goes up in parts, byte for byte.
    const large = jsonl(...records, ...records, ...records);
    write('large.jsonl', large);
    const multi = await json(['files', 'upload', 'large.jsonl', '--wait']);
    assert.equal(multi.processing_status, 'COMPLETED');
    assert.equal(multi.bytes, Buffer.byteLength(large));
    const parts = await p.db.query('SELECT part_count, state FROM file_multipart_uploads WHERE file_id = $1', [
      multi.id,
    ]);
    assert.deepEqual(parts.rows, [{ part_count: Math.ceil(multi.bytes / 4096), state: 'completed' }]);
    await json(['files', 'download', multi.id, '-o', 'large-copy.jsonl']);
    assert.equal(readFileSync(path.join(dir, 'large-copy.jsonl'), 'utf8'), large);

    const del = await gantry(['files', 'delete', id]);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(del.stdout.trim(), `Deleted ${id}.`);
    const gone = await gantry(['files', 'retrieve', id]);
    assert.equal(gone.code, 3);
    assert.match(gone.stderr, /not found/);
  });
});

describe('gantry fine-tuning', () => {
  let jobId = '';
  let trainingFile = '';

  test('create shows the price and refuses without --confirm when it cannot ask', async () => {
    write('train.jsonl', jsonl(...records));
    trainingFile = (await json(['files', 'upload', 'train.jsonl', '--wait'])).id;
    const r = await gantry(['fine-tuning', 'create', '--training-file', trainingFile, '--model', MODEL]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /Estimated price\s*│ \$\d+\.\d+/);
    assert.match(r.stderr, /Training tokens\s*│ \d+/);
    assert.match(r.stderr, /pass --confirm/);
    assert.equal((await json(['fine-tuning', 'list'])).data.length, 0, 'no job was created');
  });

  test('preview shows the tokenization of the first rows as a table', async () => {
    const r = await gantry([
      'fine-tuning',
      'preview',
      '--training-file',
      trainingFile,
      '--model',
      MODEL,
      '--top-k',
      '2',
    ]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /conversation dataset, max_seq_length 256, train_on_inputs false/);
    assert.match(r.stdout, /│ row │ tokens │ trained │ truncated │ trained spans/);
    const rows = r.stdout.split('\n').filter((l) => /^│ [12] /.test(l));
    assert.equal(rows.length, 2);
  });

  test('a job from a local file to its weights on disk: create --confirm, events, checkpoints, download', async () => {
    // A local path as --training-file is checked, uploaded and validated first.
    const created = await gantry([
      'fine-tuning',
      'create',
      '--training-file',
      'train.jsonl',
      '--model',
      MODEL,
      '--n-epochs',
      '2',
      '--n-checkpoints',
      '2',
      '--batch-size',
      '8',
      '--learning-rate',
      '0.01',
      '--max-seq-length',
      '64',
      '--lora-alpha',
      '16',
      '--suffix',
      'cli',
      '--random-seed',
      '7',
      '--confirm',
    ]);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, /Estimated price\s*│ \$/);
    assert.match(created.stdout, /Training type\s*│ LoRA \(r 8, alpha 16, dropout 0,/);
    jobId = /ID\s*│ (ft-[0-9a-f-]+)/.exec(created.stdout)?.[1] ?? '';
    assert.ok(jobId, created.stdout);

    const waited = await gantry(['fine-tuning', 'wait', jobId, '--timeout', '120']);
    assert.equal(waited.code, 0, waited.stderr);
    assert.match(waited.stdout, /Status\s*│ completed/);
    assert.match(waited.stdout, /Epochs\s*│ 2 \/ 2 completed/);

    const list = await gantry(['fine-tuning', 'list']);
    assert.match(list.stdout, new RegExp(`${jobId}.*completed.*${MODEL}.*reference-byte-tiny-cli-`));

    const events = await gantry(['fine-tuning', 'events', jobId]);
    assert.match(events.stdout, /tokenized_dataset_upload_complete/);
    assert.match(events.stdout, /job_complete/);

    const checkpoints = await json(['fine-tuning', 'checkpoints', jobId]);
    const intermediate = checkpoints.data.filter((c: any) => c.checkpoint_type === 'intermediate');
    assert.equal(intermediate.length, 2);
    const table = await gantry(['fine-tuning', 'checkpoints', jobId]);
    assert.ok(table.stdout.includes(`${jobId}:${intermediate[0].step}`), table.stdout);

    const metrics = await json(['fine-tuning', 'metrics', jobId]);
    assert.ok(metrics.metrics.some((m: any) => typeof m['train/loss'] === 'number'));

    // The final weights (merged, the default for LoRA), the adapter, and one intermediate checkpoint.
    const download = await gantry(['fine-tuning', 'download', jobId]);
    assert.equal(download.code, 0, download.stderr);
    assert.match(download.stdout, new RegExp(`Wrote ${jobId}\\.tar\\.zst`));
    assert.equal(download.stderr, '', 'no progress bar without a terminal');
    const step = intermediate[0].step;
    const adapter = await json(['fine-tuning', 'download', jobId, '--checkpoint-type', 'adapter']);
    assert.equal(adapter.output, `${jobId}-adapter.tar.zst`);
    const stepped = await json(['fine-tuning', 'download', jobId, '--checkpoint-step', String(step)]);
    assert.equal(stepped.output, `${jobId}-step-${step}.tar.zst`);
    const listing = (file: string) => {
      const r = spawnSync('tar', ['--zstd', '-tf', file], { cwd: dir, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim().split('\n').sort();
    };
    assert.deepEqual(listing(`${jobId}.tar.zst`), ['config.json', 'model.safetensors']);
    assert.deepEqual(listing(`${jobId}-adapter.tar.zst`), ['adapter.safetensors', 'config.json']);
    assert.ok(listing(`${jobId}-step-${step}.tar.zst`).includes('adapter.safetensors'));
    assert.equal(readdirSync(dir).filter((f) => f.endsWith('.part')).length, 0, 'no partial downloads are left behind');

    const tokenized = await gantry(['fine-tuning', 'download-tokenized-dataset', jobId]);
    assert.equal(tokenized.code, 0, tokenized.stderr);
    assert.ok(statSync(path.join(dir, `${jobId}-tokenized-dataset.tar.zst`)).size > 0);

    // An unknown step is the API's 404, printed from its body.
    const noStep = await gantry(['fine-tuning', 'download', jobId, '--checkpoint-step', '99999']);
    assert.equal(noStep.code, 3);
    assert.match(noStep.stderr, /has no checkpoint at step 99999/);
  });

  test("deploy by the job's model_object_name resolves exactly one model; an unknown name is exit code 3", async () => {
    const job = await json(['fine-tuning', 'retrieve', jobId]);
    assert.match(job.model_object_name, new RegExp(`^${t.projectSlug}/`));
    const ep = await gantry(['endpoints', 'create', 'cli-ep']);
    assert.equal(ep.code, 0, ep.stderr);
    assert.match(ep.stdout, new RegExp(`Call as\\s*│ ${t.projectSlug}/cli-ep`));
    const deployed = await gantry([
      'endpoints',
      'deploy',
      'cli-ep',
      '--model',
      job.model_object_name,
      '--name',
      'first',
      '--validate-only',
      '--json',
    ]);
    assert.equal(deployed.code, 0, deployed.stderr);
    assert.equal(JSON.parse(deployed.stdout).modelId, job.model_object_id);
    const unknown = await gantry(['endpoints', 'deploy', 'cli-ep', '--model', `${t.projectSlug}/nope`, '--name', 'x']);
    assert.equal(unknown.code, 3);
    assert.match(unknown.stderr, new RegExp(`No model named '${t.projectSlug}/nope'`));
    const models = await gantry(['models', 'list']);
    assert.ok(models.stdout.includes(job.model_object_name));
  });

  test('cancel of a finished job is a conflict: exit code 5', async () => {
    const r = await gantry(['fine-tuning', 'cancel', jobId]);
    assert.equal(r.code, 5);
    assert.match(r.stderr, /is already completed\. \(HTTP 409 conflict_error, code job_finished\)/);
  });
});

describe('gantry queue', () => {
  test('submit, status, metrics, cancel, clear', async () => {
    const model = `cli-${newId('d').slice(2, 10)}`;
    await insertDeployment(p.db, { id: newId('dep'), projectId: t.projectId, name: model });
    const submitted = await gantry(['queue', 'submit', '--model', model, '--payload', '{"n": 1}', '--priority', '3']);
    assert.equal(submitted.code, 0, submitted.stderr);
    const id = submitted.stdout.trim();
    assert.match(id, /^job-/);
    write('payload.json', '{"n": 2}');
    const second = await json([
      'queue',
      'submit',
      '--model',
      model,
      '--payload',
      '@payload.json',
      '--info',
      '{"tag": "b"}',
    ]);

    const status = await gantry(['queue', 'status', '--model', model, id]);
    assert.match(status.stdout, /Status\s*│ pending/);
    assert.match(status.stdout, /Priority\s*│ 3/);
    assert.match(status.stdout, /Payload\s*│ \{"n":1\}/);
    assert.deepEqual(await json(['queue', 'metrics', '--model', model]), {
      messages_waiting: 2,
      messages_running: 0,
      total_jobs: 2,
    });

    const cancel = await gantry(['queue', 'cancel', '--model', model, id]);
    assert.equal(cancel.code, 0, cancel.stderr);
    assert.equal(cancel.stdout.trim(), `${id}: canceled`);
    const again = await gantry(['queue', 'cancel', '--model', model, id]);
    assert.equal(again.code, 5);
    assert.match(again.stderr, /only pending jobs can be canceled\. \(HTTP 409 conflict_error, code job_not_pending\)/);

    const clear = await gantry(['queue', 'clear', '--model', model]);
    assert.equal(clear.stdout.trim(), 'Canceled 1 pending job(s).');
    assert.equal((await json(['queue', 'status', '--model', model, second.request_id])).status, 'canceled');

    const badPayload = await gantry(['queue', 'submit', '--model', model, '--payload', '[1]']);
    assert.equal(badPayload.code, 2);
    const noQueue = await gantry(['queue', 'metrics', '--model', 'no-such-deployment']);
    assert.equal(noQueue.code, 3);
    assert.match(noQueue.stderr, /No deployment named 'no-such-deployment'/);
  });
});

describe('gantry clusters', () => {
  test('create, list, get, credentials, update, delete', async () => {
    const created = await json([
      'clusters',
      'create',
      '--name',
      'cli-cluster',
      '--region',
      REGION,
      '--gpu-type',
      'H100_SXM',
      '--num-gpus',
      '8',
      '--nvidia-version-id',
      NVIDIA_VERSION_ID,
    ]);
    const id = created.cluster_id;
    assert.match(id, /^cl-/);
    const list = await gantry(['clusters', 'list']);
    assert.match(list.stdout, new RegExp(`${id}.*cli-cluster.*8 x H100_SXM.*${REGION}.*ON_DEMAND`));
    const get = await gantry(['clusters', 'get', id]);
    assert.match(get.stdout, /GPUs\s*│ 8 x H100_SXM/);

    await eventually(
      () => json(['clusters', 'get', id]),
      (c) => !!c.kube_config,
    );
    const creds = await gantry(['clusters', 'credentials', id, '-o', 'kubeconfig.yaml']);
    assert.equal(creds.code, 0, creds.stderr);
    assert.equal(statSync(path.join(dir, 'kubeconfig.yaml')).mode & 0o777, 0o600);

    const odd = await gantry(['clusters', 'update', id, '--num-gpus', '12']);
    assert.equal(odd.code, 2);
    assert.match(odd.stderr, /must be a multiple of 8/);
    const resized = await gantry(['clusters', 'update', id, '--num-gpus', '16']);
    assert.equal(resized.code, 0, resized.stderr);
    await eventually(
      () => json(['clusters', 'get', id]),
      (c) => c.num_gpus === 16,
    );

    const del = await gantry(['clusters', 'delete', id]);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(del.stdout.trim(), `Deleting ${id}.`);
    await eventually(
      () => json(['clusters', 'get', id]),
      (c) => !!c.deleted_at,
    );
    const missing = await gantry(['clusters', 'get', 'cl-000000000000']);
    assert.equal(missing.code, 3);
  });
});

describe('gantry audio', () => {
  test('a speech model this installation lacks is the API 404, printed from its body', async () => {
    write('clip.wav', 'RIFF');
    const r = await gantry(['audio', 'transcribe', 'clip.wav', '--model', 'openai/whisper-large-v3']);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /No speech host of this installation has openai\/whisper-large-v3 now/);
    const notAudio = await gantry(['audio', 'translate', 'train.jsonl', '--model', 'openai/whisper-base']);
    assert.equal(notAudio.code, 2);
  });
});

describe('gantry usage', () => {
  test("the organization's usage report: refused until enabled (exit code 4), then a month's table", async () => {
    const refused = await gantry(['usage']);
    assert.equal(refused.code, 4);
    assert.match(
      refused.stderr,
      /not enabled for organization .*\(HTTP 403 permission_error, code billing_usage_not_enabled\)/,
    );

    const admin = await createTenant(p.db, { platformAdmin: true });
    const enable = await fetch(`${p.baseUrl}/v1/admin/organizations/${t.organizationId}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${admin.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ billing_usage_enabled: true }),
    });
    assert.equal(enable.status, 200);

    const month = new Date().toISOString().slice(0, 7);
    const report = await json(['usage']);
    assert.equal(report.billing_period, month);
    assert.equal(report.organization_id, t.organizationId);
    assert.equal(report.next_cursor, null, 'every page is fetched');
    const human = await gantry(['usage', '--month', month]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`^Billing period ${month} \\(USD\\)$`, 'm'));
    // The fine-tune above was billed to this organization: its line items and their total.
    const items = report.data.flatMap((w: any) => w.line_items);
    assert.ok(items.length > 0, 'the fine-tune above is billed');
    for (const li of items) assert.ok(human.stdout.includes(li.product_name), li.product_name);
    // The total is the sum of the report's own line items.
    const total = items.reduce((sum: Decimal, li: any) => sum.plus(li.cost), new Decimal(0));
    assert.match(human.stdout, new RegExp(`^Total: \\$${total.toString().replace('.', '\\.')}$`, 'm'));
    const empty = await gantry(['usage', '--month', '2020-01']);
    assert.match(empty.stdout, /No usage this month\./);
    const bad = await gantry(['usage', '--month', '2020-13']);
    assert.equal(bad.code, 2);
  });
});
