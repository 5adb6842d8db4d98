/**
 * The programs Gantry runs (here the trainer, started as `<python> -m <trainer>`)
 * see none of Gantry's own configuration: not the database URL with its
 * password, not the signing secret, not the Temporal address. A stand-in
 * interpreter records the environment it was given; real processes, no mocks.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { runTrainer } from '../../providers/trainer/process-trainer';

const dir = mkdtempSync(path.join(tmpdir(), 'gantry-subprocess-env-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('the environment of the programs Gantry runs', () => {
  test('a trainer gets what it needs to run and none of the secrets of the process that starts it', async () => {
    const seen = path.join(dir, 'env.txt');
    const python = path.join(dir, 'python');
    writeFileSync(python, `#!/bin/sh\nenv > '${seen}'\nexit 3\n`);
    chmodSync(python, 0o755);
    const planted = {
      DATABASE_URL: 'postgres://gantry:db-password@127.0.0.1:5432/gantry',
      GANTRY_SIGNING_SECRET: 'signing-secret-value',
      PGPASSWORD: 'pg-password',
      TEMPORAL_ADDRESS: '127.0.0.1:7233',
      GANTRY_MODEL_DIR: 'relative-models',
      HF_HOME: '/hf-cache',
    };
    const saved = Object.fromEntries(Object.keys(planted).map((k) => [k, process.env[k]]));
    Object.assign(process.env, planted);
    try {
      const run = await runTrainer({ python, modelDir: '/models', config: { output_dir: path.join(dir, 'out') } });
      assert.equal(run.exitCode, 3, 'the stand-in ran');
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    const env = Object.fromEntries(
      readFileSync(seen, 'utf8')
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    for (const secret of ['DATABASE_URL', 'GANTRY_SIGNING_SECRET', 'PGPASSWORD', 'TEMPORAL_ADDRESS']) {
      assert.equal(env[secret], undefined, `${secret} is not passed on`);
    }
    const text = readFileSync(seen, 'utf8');
    assert.ok(!text.includes('db-password') && !text.includes('signing-secret-value'), 'no secret value anywhere');
    assert.equal(env.PATH, process.env.PATH, 'PATH is');
    assert.equal(env.HF_HOME, '/hf-cache', 'model caches are');
    assert.equal(
      env.GANTRY_MODEL_DIR,
      '/models',
      "the model directory it was given (from the configuration), not this process's",
    );
    assert.equal(env.HF_HUB_OFFLINE, '1', 'no hub is asked for weights');
    assert.equal(env.PYTHONUNBUFFERED, '1');
  });
});
