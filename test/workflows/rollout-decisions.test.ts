/**
 * The endpointRollout workflow's decisions in Temporal's time-skipping test
 * server with the activity doubles of test/helpers/rollout-doubles.ts: a gate
 * that fails pauses the rollout itself, and operators find it by GantryPhase;
 * a cancel that races the rollout's end still gets its answer.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { rolloutWorkflowId } from '../../shared/rollouts';
import { SA_PHASE, SA_STATUS, statusSearchAttributes } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import type { endpointRollout as rolloutWorkflow } from '../../workflows/rollouts';
import { RolloutActivityDoubles, rolloutInput } from '../helpers/rollout-doubles';
import { workflowTestEnvForFile, recordHistoryIfAsked, runWorkers, until } from '../helpers/workflow-env';

describe('rollout workflow decisions (time-skipping)', () => {
  const t = workflowTestEnvForFile();

  const start = (id: string) =>
    t.env.client.workflow.start<typeof rolloutWorkflow>('endpointRollout', {
      taskQueue: CONTROL_TASK_QUEUE,
      workflowId: rolloutWorkflowId(id),
      args: [rolloutInput(id)],
      // As the API starts it (startResourceWorkflow).
      typedSearchAttributes: statusSearchAttributes('ROLLOUT_STATE_RUNNING'),
    });
  const searched = async (handle: WorkflowHandle) => {
    const d = await handle.describe();
    return { status: d.typedSearchAttributes.get(SA_STATUS), phase: d.typedSearchAttributes.get(SA_PHASE) };
  };

  test(
    'a failed gate pauses the rollout (phase waiting); resumed, it completes (phase done)',
    { timeout: 60_000 },
    async () => {
      const doubles = new RolloutActivityDoubles();
      doubles.gates = [false];
      const worker = await t.worker(CONTROL_TASK_QUEUE, doubles.activities());
      await runWorkers([worker], async () => {
        const handle = await start('ts-gate-fails');
        await until(
          () => doubles.latest,
          (s) => s?.state === 'ROLLOUT_STATE_RUNNING' && doubles.traffic.length === 1,
          'the first step',
        );
        await t.advance(61_000);
        await until(
          () => doubles.latest,
          (s) => s?.state === 'ROLLOUT_STATE_SYSTEM_PAUSED',
          'the rollout to pause itself',
        );
        assert.deepEqual(await searched(handle), { status: 'ROLLOUT_STATE_SYSTEM_PAUSED', phase: 'waiting' });
        await handle.executeUpdate('resumeRollout', { args: [] });
        await t.advance(61_000);
        await t.advance(61_000);
        assert.equal(await t.finished(handle), 'ROLLOUT_STATE_COMPLETED');
        assert.deepEqual(
          doubles.traffic,
          [25, 100, 100],
          '25% held through the pause, then the last step and the landing',
        );
        assert.deepEqual(await searched(handle), { status: 'ROLLOUT_STATE_COMPLETED', phase: 'done' });
        await recordHistoryIfAsked(handle, 'endpointRollout', 'gate-failed-resumed-completed');
      });
    },
  );

  test(
    'a rollout canceled with REVERT moves the traffic back to the source and restores both bounds',
    { timeout: 60_000 },
    async () => {
      const doubles = new RolloutActivityDoubles();
      const worker = await t.worker(CONTROL_TASK_QUEUE, doubles.activities());
      await runWorkers([worker], async () => {
        const handle = await start('ts-cancel-revert');
        await until(
          () => doubles.traffic,
          (x) => x.length === 1,
          'the first step',
        );
        await handle.executeUpdate('cancelRollout', {
          args: [{ reason: 'the new build is slow', disposition: 'CANCEL_DISPOSITION_REVERT' }],
        });
        assert.equal(await t.finished(handle), 'ROLLOUT_STATE_CANCELED');
        assert.deepEqual(doubles.traffic, [25, 0], 'the first step, then all of it back on the source');
        const input = rolloutInput('ts-cancel-revert');
        assert.deepEqual(doubles.bounds.slice(-2), [
          { deploymentId: input.sourceDeploymentId, min: input.source.min, max: input.source.max },
          { deploymentId: input.targetDeploymentId, min: input.target.min, max: input.target.max },
        ]);
        assert.equal(doubles.latest?.currentTrafficPercent, 0);
        assert.match(doubles.latest?.condition?.message ?? '', /reverted/);
        await recordHistoryIfAsked(handle, 'endpointRollout', 'canceled-reverted-to-source');
      });
    },
  );

  test(
    'a cancel whose handler is still recording when the rollout ends gets its answer',
    { timeout: 60_000 },
    async () => {
      const doubles = new RolloutActivityDoubles();
      // The cancel handler's own snapshot lands after the main loop has recorded CANCELED.
      doubles.slow = { state: 'ROLLOUT_STATE_CANCELLING', ms: 1500 };
      const worker = await t.worker(CONTROL_TASK_QUEUE, doubles.activities());
      await runWorkers([worker], async () => {
        const handle = await start('ts-cancel-race');
        await until(
          () => doubles.traffic,
          (x) => x.length === 1,
          'the first step',
        );
        await handle.executeUpdate('cancelRollout', { args: [{ reason: 'an operator changed their mind' }] });
        assert.equal(await t.finished(handle), 'ROLLOUT_STATE_CANCELED');
        assert.ok(
          doubles.events.some((e) => e.type === 'rollout.canceled'),
          doubles.events.map((e) => e.type).join(','),
        );
        await recordHistoryIfAsked(handle, 'endpointRollout', 'cancel-handler-outlasts-the-run');
      });
    },
  );
});
