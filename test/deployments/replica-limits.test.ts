/**
 * What one replica gets of its host: the defaults where its deployment names nothing, never more
 * than the ceilings (a deployment made before a ceiling was lowered included), and an installation
 * whose defaults are above its ceilings does not start. (That a replica is held to them, and that
 * the API refuses more, is test/security/replica-resources.test.ts's.)
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ConfigError, loadConfig } from '../../platform/config';
import { replicaLimits } from '../../providers/containers/replica-limits';

const defaults = { cpus: 2, memoryGiB: 4, storageGiB: 10 };
const max = { cpus: 16, memoryGiB: 64, storageGiB: 100 };

test("a replica gets its deployment's limits, the defaults for those it leaves out, and never more than the ceilings", () => {
  assert.deepEqual(replicaLimits({ cpu: 0.5, memoryGiB: 0.25, storageGiB: 1 }, defaults, max), {
    cpus: 0.5,
    memoryGiB: 0.25,
    storageGiB: 1,
  });
  assert.deepEqual(replicaLimits({}, defaults, max), defaults);
  // Asked for before the ceilings were what they are now.
  assert.deepEqual(replicaLimits({ cpu: 64, memoryGiB: 512, storageGiB: 4096 }, defaults, max), max);
});

test('defaults above the ceilings stop the installation, naming both settings', () => {
  assert.deepEqual(loadConfig({}).replicaMaxLimits, { ...max, imageGiB: 20 });
  assert.throws(
    () => loadConfig({ GANTRY_REPLICA_DEFAULT_STORAGE_GIB: '20', GANTRY_REPLICA_MAX_STORAGE_GIB: '10' }),
    (err: Error) =>
      err instanceof ConfigError &&
      /GANTRY_REPLICA_DEFAULT_STORAGE_GIB: 20 is more than GANTRY_REPLICA_MAX_STORAGE_GIB/.test(err.message),
  );
  assert.throws(() => loadConfig({ GANTRY_REPLICA_MAX_CPUS: '1' }), /GANTRY_REPLICA_DEFAULT_CPUS: 2 is more than/);
  // No default means "no limit" any more.
  assert.throws(() => loadConfig({ GANTRY_REPLICA_DEFAULT_MEMORY_GIB: '0' }), ConfigError);
});
