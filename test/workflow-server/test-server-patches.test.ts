/**
 * The time-skipping test server's patches (test/workflow-server/patches/) do what they say, on the
 * server the workflow tests run.
 *
 * cancel-of-a-fired-timer.patch: a workflow task that cancels a timer which fired while the task
 * was in progress is accepted, as the real server accepts it. Unpatched (1.31.0 and the latest
 * release, 1.38.0), the server refuses that completion and the run never gets another workflow
 * task: in a measured run, this test's workflow hung on its second round every time.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import { workflowTestEnvForFile } from '../helpers/workflow-env';
import type { timerRace } from './fixtures/timer-race-workflow';

const WORKFLOWS_PATH = require.resolve('./fixtures/timer-race-workflow');

describe('time-skipping test server patches', () => {
  const t = workflowTestEnvForFile();

  test('a workflow task that cancels a timer which fired during it is accepted', async () => {
    const rounds = 150;
    // Bundled once, for the worker and the replay (webpack is most of this file's CPU).
    const workflowBundle = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH });
    const worker = await Worker.create({
      connection: t.env.nativeConnection,
      namespace: t.env.namespace ?? 'default',
      taskQueue: 'timer-race',
      workflowBundle,
      debugMode: true, // in this thread, as the workflow tests' workers run (test/helpers/workflow-env.ts)
    });
    await worker.runUntil(async () => {
      const handle = await t.env.client.workflow.start<typeof timerRace>('timerRace', {
        taskQueue: 'timer-race',
        workflowId: 'timer-race',
        args: [rounds],
      });
      // Signals every 0-4 ms race the 3 ms timers, until the last rounds (a signal that comes as the
      // run completes only fails that task, and the server waits out its timeout to try again).
      let racing = true;
      const signals = (async () => {
        while (racing && (await handle.query<number>('roundsDone')) < rounds - 10) {
          await handle.signal('poke');
          await new Promise((r) => setTimeout(r, Math.random() * 4));
        }
      })().catch((err: unknown) => {
        // A query to a run the server stopped serving never answers; once the test has failed on
        // that, what the abandoned query says as the connection closes is beside the point.
        if (racing) throw err;
      });
      try {
        // Bounded: a run the server stopped serving fails here with its last events.
        assert.equal(await t.finished<number>(handle), rounds);
      } finally {
        racing = false;
      }
      await signals;

      const history = await handle.fetchHistory();
      const events = history.events ?? [];
      const canceled = events.filter((e) => e.timerCanceledEventAttributes).length;
      const fired = events.filter((e) => e.timerFiredEventAttributes).length;
      assert.equal(canceled + fired, rounds, 'every round ended its timer, by a cancel or by firing');
      assert.ok(canceled > 0 && fired > 0, `both kinds of round happened (canceled ${canceled}, fired ${fired})`);
      // The history the patched server wrote (a cancel in place of a fire it dropped) is the one the
      // SDK's replay expects: no nondeterminism.
      await Worker.runReplayHistory({ workflowBundle }, history, 'timer-race');
    });
  });
});
