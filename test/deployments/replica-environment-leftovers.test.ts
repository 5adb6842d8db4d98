/**
 * What a container host that died part way through a launch leaves of the
 * replica's variables (providers/containers/podman/replica-environment.ts): its
 * launch directory and any Podman secret it made. The next start of the host
 * removes them, and leaves the launches of a process that still runs.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { PodmanEngine } from '../../providers/containers/podman/podman-engine';
import { LaunchEnvironment, processIdentity } from '../../providers/containers/podman/replica-environment';

test("a launch's leftovers go with the next start; a running process's launch stays", async () => {
  const state = mkdtempSync(path.join(tmpdir(), 'gantry-podman-'));
  const engine = new PodmanEngine(state);
  const root = path.join(state, 'replica-env');
  const secret = `gantry-env-${randomBytes(12).toString('hex')}`;
  try {
    writeFileSync(path.join(state, 'value'), 'line one\nline two\n');
    await engine.podman(['secret', 'create', secret, path.join(state, 'value')]);
    // A process that is gone: pid 1's, with a start time it never had.
    const dead = path.join(root, '1.999999999-abc');
    mkdirSync(dead, { recursive: true });
    writeFileSync(path.join(dead, 'secrets'), `${secret}\ngantry-env-never-made`);
    execFileSync('mkfifo', [path.join(dead, 'env')]);
    // This process's own launch, under way.
    const own = path.join(root, `${processIdentity(process.pid)}-xyz`);
    mkdirSync(own);

    assert.deepEqual(await LaunchEnvironment.removeLeftovers(engine, root), ['1.999999999-abc']);
    assert.ok(!existsSync(dead));
    assert.ok(existsSync(own));
    assert.ok(!(await engine.podman(['secret', 'ls', '--format', '{{.Name}}'])).split('\n').includes(secret));
  } finally {
    await engine.podman(['secret', 'rm', secret]).catch(() => undefined);
    rmSync(state, { recursive: true, force: true });
  }
});
