/**
 * A property-based run of the whole OpenAPI document against a real stack
 * (schemathesis, pinned in test/fuzz/requirements.txt; ./dev test installs it):
 * generated requests of every shape, from a platform admin's key, must never
 * get a 5xx, a status the document does not list, or a response body that does
 * not match its schema. Two runs, each within a time budget: a fixed seed (the
 * same inputs every time) and a fresh one (new inputs each run; its seed is in
 * the test's name; GANTRY_FUZZ_SEED=<seed> replays it).
 *
 * Left out: the operations that would end the run's own access (revoking its
 * key, removing its membership), and the logs route, which with follow=true
 * streams until the client goes away (its own tests cover it).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const SCHEMATHESIS = process.env.GANTRY_SCHEMATHESIS ?? path.resolve(__dirname, '../../.venv-fuzz/bin/schemathesis');
/**
 * Each run's time budget (the same for both: what schemathesis reports as mismatched depends on how
 * much it generates, so the allow-list below holds for this budget). How many operations a run
 * reaches within it depends on the machine's load, so that is reported, not asserted.
 */
const BUDGET_SECONDS = 30;
const SELF_ENDING = [
  'revokeApiKey',
  'regenerateLegacyApiKey',
  'removeProjectMember',
  'leaveProject',
  'removeOrganizationMember',
];

/**
 * An audio request the document calls valid is accepted; with no speech host here, its documented
 * answer is 503 (no host took it within GANTRY_AUDIO_HOST_WAIT_SECONDS): a 5xx this run expects.
 */
const SCHEMATHESIS_CONFIG = `
[[operations]]
include-path-regex = "^/v1/audio/"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]
`;

let p: TestPlatform;
let admin: Tenant;
let expectedOperations = 0;
const dir = mkdtempSync(path.join(tmpdir(), 'gantry-fuzz-'));

before(async () => {
  // No speech host here: an accepted audio request waits for one; a second's wait makes it the
  // documented 503 (SCHEMATHESIS_CONFIG) well within the request timeout.
  p = await startTestPlatform({ containers: false, env: { GANTRY_AUDIO_HOST_WAIT_SECONDS: '1' } });
  admin = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin', organizationRole: 'Admin' });
  const document = await call(p.baseUrl, 'GET', '/v1/openapi.json', { key: admin.key });
  writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(document.body));
  writeFileSync(path.join(dir, 'schemathesis.toml'), SCHEMATHESIS_CONFIG);
  expectedOperations = selectedOperations(document.body as Parameters<typeof selectedOperations>[0]);
});
after(async () => {
  await p.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The operations the run should reach: every one in the document but those left out above. */
function selectedOperations(document: { paths: Record<string, Record<string, { operationId?: string }>> }): number {
  const methods = new Set(['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace']);
  let count = 0;
  for (const [route, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!methods.has(method)) continue;
      if (/\/logs$/.test(route) || SELF_ENDING.includes(operation.operationId ?? '')) continue;
      count += 1;
    }
  }
  return count;
}

/**
 * Operations that may refuse most of the data their document calls valid, each for a rule no JSON
 * Schema can state: the value must name something that exists in (or belongs to) the caller's
 * project or this installation, or must compare with another field. Every other constraint the
 * validation enforces is in the document, so any other operation in the warning fails the test.
 */
const REFUSES_WHAT_NO_SCHEMA_STATES: Record<string, string> = {
  // Names that must exist: a model family a server runs, a file, a job, a region, a part uploaded.
  'POST /v1/admin/configs': 'referenceModelId must be a model family a model server of the installation runs',
  'POST /v1/batches': 'input_file_id must be a file of the project',
  'POST /v1/evaluation': "the input file must be one of the project's files",
  'POST /v1/fine-tunes':
    "training_file, from_checkpoint and model must name the project's files and jobs and an offered base model",
  'POST /v1/fine-tunes/estimate-price': 'as POST /v1/fine-tunes',
  'POST /v1/fine-tunes/preview': "model must be an offered base model, training_file one of the project's files",
  'POST /v1/compute/clusters': "region must be a usable region; project_id, when given, the key's project",
  'POST /v1/compute/clusters/storage/volumes':
    "region must be a usable region; project_id, when given, the key's project",
  'POST /v1/deployments/secrets': "project_id, when given, must be the key's project",
  'POST /v1/files/multipart/complete': 'every part listed must have been uploaded',
  'POST /v1/storage/multipart/complete': 'every part listed must have been uploaded',
  'POST /v2/projects/{projectId}/models': 'baseModelId must be a base model of the installation',
  'POST /v2/projects/{projectId}/models/uploads': 'modelId must be a model of the project',
  'POST /v2/projects/{projectId}/endpoints/{endpointId}/rollouts':
    'the source and target must be deployments of the endpoint',
  'POST /v2/projects/{projectId}/endpoints/{endpointId}/rollouts/preview-defaults': 'as POST .../rollouts',
  // A page cursor is valid only as the API issued it (an id of the list, or its own encoding of one).
  'GET /v1/projects': 'after must be a project of the list',
  'GET /v2/projects/{projectId}/configs': 'after must be a cursor the API issued',
  'GET /v2/projects/{projectId}/endpoints': 'after must be a cursor of the list',
  'GET /v2/projects/{projectId}/endpoints/{endpointId}/deployments': 'after must be a cursor of the list',
  'GET /v2/projects/{projectId}/endpoints/{endpointId}/rollouts': 'after must be a cursor the API issued',
  'GET /v2/projects/{projectId}/models': 'after must be a cursor the API issued',
  'GET /v2/projects/{projectId}/models/uploads': 'after must be a cursor the API issued',
  // Comparisons between fields.
  'POST /v1/deployments': 'max_replicas must be at least min_replicas',
  'GET /v2/projects/{projectId}/endpoints/{id}/analytics': 'startTime must be before endTime, at most 31 days apart',
};

/** The operations listed under schemathesis' "Schema validation mismatch" warning. */
function mismatchedOperations(output: string): string[] {
  const section = /Schema validation mismatch:[^\n]*\n\n((?:  - [^\n]+\n)+)/.exec(output);
  return section ? [...section[1].matchAll(/  - ([^\n]+)/g)].map((m) => m[1].trim()) : [];
}

/** Runs schemathesis with `seed`; resolves with its exit code and the end of what it printed. */
function fuzz(seed: number, budgetSeconds: number): Promise<{ code: number | null; output: string }> {
  const args = [
    '--config-file',
    path.join(dir, 'schemathesis.toml'),
    'run',
    path.join(dir, 'openapi.json'),
    '--url',
    p.baseUrl,
    '--header',
    `Authorization: Bearer ${admin.key}`,
    '--checks',
    'not_a_server_error,status_code_conformance,response_schema_conformance',
    '--phases',
    'coverage,fuzzing',
    '--max-examples',
    '5',
    '--max-time',
    String(budgetSeconds),
    // Longer than the longest answer the API may take on purpose: a queue claim long-polls up to
    // 20 s (wait_seconds), past schemathesis' default of 10 s.
    '--request-timeout',
    '25',
    // One worker: with two, schemathesis' threads describe hypothesis lambdas at once, and
    // CPython 3.11's AST constructor (ast.parse) keeps its recursion counter per interpreter, not
    // per thread, so a run can die with "SystemError: AST constructor recursion depth mismatch"
    // (python/cpython#106905), an error in the tool that says nothing about the API.
    '--workers',
    '1',
    '--seed',
    String(seed),
    '--exclude-path-regex',
    '/logs$',
    ...SELF_ENDING.flatMap((id) => ['--exclude-operation-id', id]),
    '--no-color',
    // Shown so that the test can read them: an operation that refuses most of the data its
    // document calls valid means the document is looser than the validation.
    '--warnings',
    'validation_mismatch',
  ];
  return new Promise((resolve, reject) => {
    // Run in the scratch directory: schemathesis keeps state (.schemathesis/) in its working directory.
    const child = spawn(SCHEMATHESIS, args, {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: '1' },
    });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, output }));
  });
}

for (const [label, seed, fixed] of [
  ['a fixed seed', 1, true],
  ['a fresh seed', Number(process.env.GANTRY_FUZZ_SEED) || randomInt(2, 2 ** 31), false],
] as const) {
  test(
    `no 5xx, only documented statuses, responses matching their schemas: ${label} (${seed})`,
    { timeout: (BUDGET_SECONDS + 120) * 1000 },
    async (t) => {
      const { code, output } = await fuzz(seed, BUDGET_SECONDS);
      assert.equal(code, 0, `schemathesis --seed ${seed} found failures:\n${output.slice(-6000)}`);
      // Every operation the document lists (less those left out) was selected and reached: a
      // document or filter that silently drops operations would otherwise pass with nothing tested.
      const selected = /Selected: (\d+)\/\d+/.exec(output);
      const tested = /Tested: (\d+)/.exec(output);
      assert.ok(selected && tested, `no operation summary in schemathesis' output:\n${output.slice(-3000)}`);
      assert.equal(Number(selected[1]), expectedOperations, 'operations selected');
      // Reached within the budget: how many depends on the machine's load (a loaded run reached 140 of
      // 177 with the fixed seed), so it is reported; selection above is what a document or filter
      // that dropped operations would change, and is asserted.
      t.diagnostic(`${tested[1]} of ${expectedOperations} operations reached within ${BUDGET_SECONDS} s`);
      // Operations refusing most of the data their document calls valid: a constraint the validation
      // enforces that the document does not state (issue 45), unless it is one no schema can state.
      // Asserted for the fixed seed (the same inputs each run); a fresh seed's are new each time and
      // what they find outside the list is reported, with the seed that replays it, not failed on:
      // a finding to look into, not a regression of this change.
      const mismatched = mismatchedOperations(output);
      for (const op of mismatched) t.diagnostic(`refuses most documented-valid data: ${op}`);
      const unexplained = mismatched.filter((op) => !(op in REFUSES_WHAT_NO_SCHEMA_STATES));
      if (fixed)
        assert.deepEqual(
          unexplained,
          [],
          `the document is looser than the validation of these operations (schemathesis --seed ${seed}):\n${output.slice(-6000)}`,
        );
      else
        for (const op of unexplained)
          t.diagnostic(`not in the explained list (GANTRY_FUZZ_SEED=${seed} replays it): ${op}`);
    },
  );
}
