/**
 * How the Temporal CLI is found. The build itself (go install) is exercised by
 * every cold `./dev test`; here: the choices and the refusals.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { ensureTemporalCli, temporalCliCacheDir } from '../../scripts/lib/temporal-cli';

describe('finding the Temporal CLI', () => {
  const saved = { PATH: process.env.PATH, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-cli-'));
  after(() => {
    process.env.PATH = saved.PATH;
    process.env.XDG_CACHE_HOME = saved.XDG_CACHE_HOME;
    rmSync(dir, { recursive: true, force: true });
  });

  test('TEMPORAL_CLI must name an executable', async () => {
    const notExecutable = path.join(dir, 'temporal-text');
    writeFileSync(notExecutable, 'not a program');
    await assert.rejects(
      ensureTemporalCli({ configured: notExecutable, log: () => undefined }),
      /TEMPORAL_CLI=.* is not an executable file/,
    );
  });

  test('without a CLI on the PATH, in the cache, or Go to build one, it says what to install', async () => {
    const emptyBin = path.join(dir, 'bin');
    mkdirSync(emptyBin);
    process.env.PATH = emptyBin;
    process.env.XDG_CACHE_HOME = path.join(dir, 'cache');
    await assert.rejects(ensureTemporalCli({ log: () => undefined }), (err: Error) => {
      assert.match(err.message, /install Go/);
      assert.match(err.message, /go install github\.com\/temporalio\/cli\/cmd\/temporal@v1\.5\.1/);
      assert.match(err.message, /TEMPORAL_CLI=\/path\/to\/temporal/);
      return true;
    });
  });

  test('a CLI already in the per-user cache is reused without building', async () => {
    process.env.XDG_CACHE_HOME = path.join(dir, 'cache2');
    const cached = path.join(temporalCliCacheDir(), 'temporal');
    mkdirSync(path.dirname(cached), { recursive: true });
    writeFileSync(cached, '#!/bin/sh\n');
    chmodSync(cached, 0o755);
    process.env.PATH = path.join(dir, 'bin');
    assert.equal(await ensureTemporalCli({ log: () => undefined }), cached);
  });
});
