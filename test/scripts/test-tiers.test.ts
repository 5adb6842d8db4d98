/**
 * test/tiers.ts judges a file's tier from what it uses: checked on files of the tree whose needs are
 * plain from what they do (the reasons name the file that carries each mark).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { tierOf } from '../tiers';

const TEST_DIR = path.resolve(__dirname, '..');
const of = (file: string) => tierOf(path.join(TEST_DIR, file));

test('a file that needs nothing but its own code is pure', () => {
  assert.deepEqual(of('api/error-mapping.test.ts'), { tier: 'pure', because: [] });
});

test("a file that starts Temporal's time-skipping server is a workflow file", () => {
  const t = of('workflows/deployment-decisions.test.ts');
  assert.equal(t.tier, 'workflow');
  assert.ok(
    t.because.some((b) => b.startsWith("Temporal's time-skipping test server")),
    t.because.join('; '),
  );
});

test('a file that starts an embedded PostgreSQL of its own is a platform file', () => {
  assert.deepEqual(of('db/embedded-postgres.test.ts'), {
    tier: 'platform',
    because: ['an embedded PostgreSQL of its own (test/db/embedded-postgres.test.ts)'],
  });
});

test('what a fixture script the file runs in a child process starts counts as the file’s own need', () => {
  assert.deepEqual(of('scripts/bench-exit-code.test.ts'), {
    tier: 'platform',
    because: ['an embedded PostgreSQL of its own (test/scripts/fixtures/bench-with-one-check.ts)'],
  });
});

test('what a test helper the file imports uses counts, named by the helper', () => {
  const t = of('crash/whole-platform.test.ts');
  assert.equal(t.tier, 'platform');
  assert.ok(t.because.includes('podman (test/helpers/image-registry.ts)'), t.because.join('; '));
});
