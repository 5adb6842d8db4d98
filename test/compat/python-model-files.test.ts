/**
 * Local weight files into the model registry and back out, through the official Python CLI (PyPI
 * `together`, pinned) as a user runs it: `tg models upload` of a directory (a 45 MiB safetensors
 * file the CLI sends in three parts, a config, a file in a subdirectory, and a dotfile it leaves
 * out) makes a revision whose files are the bytes sent; `tg models download` writes them back,
 * skips what a second run already has, and fetches only the files named; a directory without
 * weights is refused with the reason, and leaves no revision and no parts behind.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { together, togetherJson, togetherRun, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';
import { safetensorsFile } from '../helpers/archives';

let p: TestPlatform;
let t: Tenant;
let cli: PythonClient;
let dir: string;
let modelId: string;

const FILES: Record<string, Buffer> = {
  'model.safetensors': safetensorsFile({ shape: [(45 * 1024 * 1024) / 4], fill: 'random' }),
  'config.json': Buffer.from(JSON.stringify({ architectures: ['TinyForCausalLM'] })),
  'tokenizer/tokenizer.json': Buffer.from(JSON.stringify({ model: { type: 'BPE' } })),
};
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const inProject = (...args: string[]) => ['--project', t.projectId, ...args];

function writeTree(root: string, files: Record<string, Buffer>) {
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), body);
  }
}

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  dir = mkdtempSync(path.join(tmpdir(), 'gantry-model-files-'));
  cli = { baseUrl: p.baseUrl, key: t.key, cwd: dir };
  const created = await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/models`, {
    key: t.key,
    json: { name: 'my-weights', baseModelId: 'gantry/reference-byte-tiny', type: 'model' },
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  modelId = created.body.id;
});
after(() => p.stop());

test('tg models upload: a directory becomes a revision of exactly its files; tg models download writes them back', async () => {
  const source = path.join(dir, 'source');
  writeTree(source, { ...FILES, '.cache/ignored.bin': Buffer.from('not sent') });
  const out = await together(cli, ...inProject('models', 'upload', modelId, source));
  const revision = /Upload complete\. Revision: (rv_[0-9a-f]+)/.exec(out)?.[1];
  assert.ok(revision, out);

  const listed = await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/models/${modelId}/files`, { key: t.key });
  assert.equal(listed.body.revisionId, revision);
  assert.deepEqual(
    listed.body.data.map((f: any) => [f.path, Number(f.sizeBytes), f.hash]),
    Object.entries(FILES)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([name, body]) => [name, body.length, `sha256:${sha256(body)}`]),
  );
  const model = await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/models/${modelId}`, { key: t.key });
  assert.equal(model.body.weights.parameters.total, String((45 * 1024 * 1024) / 4));

  const target = path.join(dir, 'download');
  const first = await togetherJson(cli, ...inProject('models', 'download', modelId, target));
  assert.equal(first.revisionId, revision);
  assert.equal(first.files, 3);
  assert.equal(first.skipped, 0);
  for (const [name, body] of Object.entries(FILES))
    assert.equal(sha256(readFileSync(path.join(target, name))), sha256(body), name);

  // The files a second run finds with the upload's ETag are not fetched again.
  const again = await togetherJson(cli, ...inProject('models', 'download', modelId, target));
  assert.equal(again.skipped, 3);

  const only = path.join(dir, 'only-config');
  const one = await togetherJson(
    cli,
    ...inProject('models', 'download', modelId, only, '--revision', revision, '--files', 'config.json'),
  );
  assert.equal(one.files, 1);
  assert.deepEqual(readFileSync(path.join(only, 'config.json')), FILES['config.json']);
});

test('tg models upload of files without weights is refused with the reason; no revision, no parts left', async () => {
  const before = await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/models/${modelId}/revisions`, {
    key: t.key,
  });
  const source = path.join(dir, 'no-weights');
  writeTree(source, { 'config.json': FILES['config.json'] });
  const r = await togetherRun(cli, ...inProject('models', 'upload', modelId, source));
  assert.notEqual(r.code, 0);
  assert.match(r.stdout + r.stderr, /not a usable model, so no revision was made: no \.safetensors file/);

  const after = await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/models/${modelId}/revisions`, {
    key: t.key,
  });
  assert.equal(after.body.data.length, before.body.data.length);
  const { rows } = await p.db.query(
    `SELECT u.state, count(pt.*)::int AS parts FROM model_file_uploads u
       LEFT JOIN model_file_upload_parts pt ON pt.upload_id = u.id
      WHERE u.model_id = $1 GROUP BY u.id, u.state ORDER BY u.created_at`,
    [modelId],
  );
  assert.deepEqual(rows, [
    { state: 'completed', parts: 0 },
    { state: 'failed', parts: 0 },
  ]);
});
