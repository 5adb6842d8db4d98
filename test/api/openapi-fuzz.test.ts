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
const BUDGET_SECONDS = 30;
const SELF_ENDING = [
  'revokeApiKey',
  'regenerateLegacyApiKey',
  'removeProjectMember',
  'leaveProject',
  'removeOrganizationMember',
];

let p: TestPlatform;
let admin: Tenant;
const dir = mkdtempSync(path.join(tmpdir(), 'gantry-fuzz-'));

before(async () => {
  p = await startTestPlatform({ containers: false });
  admin = await createTenant(p.db, { platformAdmin: true, projectRole: 'Admin', organizationRole: 'Admin' });
  const document = await call(p.baseUrl, 'GET', '/v1/openapi.json', { key: admin.key });
  writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(document.body));
});
after(async () => {
  await p.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs schemathesis with `seed`; resolves with its exit code and the end of what it printed. */
function fuzz(seed: number): Promise<{ code: number | null; output: string }> {
  const args = [
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
    String(BUDGET_SECONDS),
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
    '--warnings',
    'off',
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

for (const [label, seed] of [
  ['a fixed seed', 1],
  ['a fresh seed', Number(process.env.GANTRY_FUZZ_SEED) || randomInt(2, 2 ** 31)],
] as const) {
  test(
    `no 5xx, only documented statuses, responses matching their schemas: ${label} (${seed})`,
    { timeout: (BUDGET_SECONDS + 120) * 1000 },
    async () => {
      const { code, output } = await fuzz(seed);
      assert.equal(code, 0, `schemathesis --seed ${seed} found failures:\n${output.slice(-6000)}`);
    },
  );
}
