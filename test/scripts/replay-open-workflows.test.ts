/**
 * `npm run replay-open-workflows` against a running installation: every open
 * run of the real workflows replays; a run whose history the current code
 * cannot reproduce is named and the command exits 1.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { NativeConnection, Worker } from '@temporalio/worker';
import { eventually, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { createCluster, deleteAllClusters, startClusterPlatform, waitForCluster } from '../helpers/clusters';
import { NODE_TYPESCRIPT_ARGS } from '../../platform/node-typescript';

const ROOT = path.resolve(__dirname, '..', '..');

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startClusterPlatform();
  t = await createTenant(p.db);
});
after(async () => {
  await deleteAllClusters(p, t.key);
  await p.stop();
});

function replayOpen() {
  const run = spawnSync(process.execPath, [...NODE_TYPESCRIPT_ARGS, 'scripts/replay-open-workflows.ts'], {
    cwd: ROOT,
    env: process.env,
    encoding: 'utf8',
    timeout: 120_000,
  });
  return { code: run.status, out: run.stdout + run.stderr };
}

describe('replay-open-workflows', () => {
  test('every open run of the current workflows replays', async () => {
    const c = await createCluster(p, t.key, { num_gpus: 8 });
    await waitForCluster(p, t.key, c.cluster_id, (x) => x.status === 'Ready');
    const { code, out } = replayOpen();
    assert.equal(code, 0, out);
    const m = /(\d+) open workflow\(s\) replayed against this code: (\d+) ok, 0 would break/.exec(out);
    assert.ok(m && Number(m[1]) >= 1 && m[1] === m[2], out);
  });

  test('a run the current code cannot reproduce is named, and the command fails', async () => {
    // A `cluster` run made by different code, on a queue of its own.
    const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS! });
    const worker = await Worker.create({
      connection,
      namespace: p.config.temporal.namespace,
      taskQueue: 'replay-open-workflows-test',
      workflowsPath: require.resolve('./fixtures/changed-cluster-workflow'),
    });
    const running = worker.run();
    try {
      const handle = await p.temporal.workflow.start('cluster', {
        taskQueue: 'replay-open-workflows-test',
        workflowId: 'cluster/changed-code',
      });
      await eventually(
        () => handle.fetchHistory(),
        (h) => (h.events ?? []).some((e) => e.timerFiredEventAttributes),
        20_000,
      );
      const { code, out } = replayOpen();
      assert.equal(code, 1, out);
      assert.match(out, /FAIL cluster\/changed-code: /);
      assert.match(out, /[1-9]\d* would break/);
      await handle.terminate('test over');
    } finally {
      worker.shutdown();
      await running;
      await connection.close();
    }
  });
});
