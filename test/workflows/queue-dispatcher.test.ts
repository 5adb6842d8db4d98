/**
 * The queueDispatcher workflow's decisions in Temporal's time-skipping test server: one run per
 * queue sleeps until the next deadline its sweep reports, looks at once when a claim wakes it,
 * ends when there is nothing to watch, and continues as new before its history grows long.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { QueueActivities } from '../../activities/queue';
import { queueDispatcherWorkflowId } from '../../shared/deployments';
import type { Sweep } from '../../db/queue';
import { SA_PHASE } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import {
  DISPATCHER_SWEEPS_PER_RUN,
  wakeQueueDispatcher,
  type queueDispatcher as queueDispatcherWorkflow,
} from '../../workflows/queue';
import { workflowTestEnvForFile, recordHistoryIfAsked, runWorkers, until } from '../helpers/workflow-env';

const idle: Sweep = { requeued: 0, failed: 0, deleted: 0, running: 0, nextInMs: null };

/** A sweep double that answers `answers` in turn (the last one again once they run out) and counts calls. */
function sweeps(...answers: Sweep[]) {
  const calls: number[] = [];
  const activities: Pick<QueueActivities, 'sweepQueue'> = {
    async sweepQueue() {
      calls.push(Date.now());
      return answers[Math.min(calls.length, answers.length) - 1];
    },
  };
  return { calls, activities };
}

describe('queue dispatcher decisions (time-skipping)', () => {
  const t = workflowTestEnvForFile();

  const start = (id: string) =>
    t.env.client.workflow.start<typeof queueDispatcherWorkflow>('queueDispatcher', {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: queueDispatcherWorkflowId(id),
      args: [{ deploymentId: id, retentionSeconds: 3600 }],
    });

  test(
    'sleeps until the deadline its sweep reports; a wake looks at once; nothing left to watch ends the run',
    { timeout: 60_000 },
    async () => {
      const s = sweeps(
        { ...idle, running: 1, nextInMs: 60_000 },
        { ...idle, running: 2, nextInMs: 45_000 },
        {
          ...idle,
          requeued: 2,
        },
      );
      await runWorkers([await t.worker(CONTROL_TASK_QUEUE, s.activities)], async () => {
        const handle = await start('ts-queue-wake');
        await until(
          () => s.calls.length,
          (n) => n === 1,
          'the first sweep',
        );
        await t.advance(30_000);
        assert.equal(s.calls.length, 1, 'no look before the deadline');
        await handle.signal(wakeQueueDispatcher);
        await until(
          () => s.calls.length,
          (n) => n === 2,
          'a look as soon as it is woken',
        );
        await t.advance(40_000);
        assert.equal(s.calls.length, 2, 'the new deadline (45 s) not reached yet');
        await t.advance(10_000);
        assert.equal(await t.finished(handle), 'idle');
        assert.equal(s.calls.length, 3, 'the third sweep found nothing left to watch');
        // An operator's search for active work no longer lists it (issue 44).
        assert.equal((await handle.describe()).typedSearchAttributes.get(SA_PHASE), 'done');
        await recordHistoryIfAsked(handle, 'queueDispatcher', 'woken-then-idle');
        await recordHistoryIfAsked(handle, 'queueDispatcher', 'idle-says-done');
      });
    },
  );

  test(
    `a queue watched for long continues as new every ${DISPATCHER_SWEEPS_PER_RUN} sweeps; its runs stay short`,
    { timeout: 120_000 },
    async () => {
      const s = sweeps({ ...idle, running: 4, nextInMs: 1_000 });
      await runWorkers([await t.worker(CONTROL_TASK_QUEUE, s.activities)], async () => {
        const handle = await start('ts-queue-long');
        const firstRun = (await handle.describe()).runId;
        await t.advance((DISPATCHER_SWEEPS_PER_RUN + 10) * 1_000, 1_000);
        const now = await handle.describe();
        assert.notEqual(now.runId, firstRun, 'continued as new');
        assert.equal(now.status.name, 'RUNNING');
        const first = await t.env.client.workflow.getHandle(handle.workflowId, firstRun).fetchHistory();
        assert.ok(first.events!.length < 1_000, `${first.events!.length} events in the first run`);
        assert.ok(s.calls.length > DISPATCHER_SWEEPS_PER_RUN);
        await handle.terminate('test done');
        await recordHistoryIfAsked(
          t.env.client.workflow.getHandle(handle.workflowId, firstRun),
          'queueDispatcher',
          'continued-as-new',
        );
      });
    },
  );
  test(
    'a sweep that fails again and again (the database down) is retried until it works; nothing is lost',
    { timeout: 60_000 },
    async () => {
      let failures = 12;
      const looked: number[] = [];
      const activities: Pick<QueueActivities, 'sweepQueue'> = {
        async sweepQueue() {
          if (failures > 0) {
            failures--;
            throw ApplicationFailure.retryable('connection to PostgreSQL refused', 'InjectedFault');
          }
          looked.push(Date.now());
          return idle;
        },
      };
      await runWorkers([await t.worker(CONTROL_TASK_QUEUE, activities)], async () => {
        const handle = await start('ts-queue-db-down');
        // Retries back off to 10 s: about two simulated minutes of refusals.
        for (let i = 0; i < 60 && looked.length === 0; i++) await t.advance(5_000, 1_000);
        assert.equal(failures, 0);
        assert.equal(await t.finished(handle), 'idle', 'the sweep that worked found nothing left: the run ends');
        const events = (await handle.fetchHistory()).events ?? [];
        assert.ok(events.length < 30, `${events.length} events: retries add none`);
      });
    },
  );
});
