/**
 * The fineTune workflow's decisions in Temporal's time-skipping test server
 * with the activity doubles of test/helpers/fine-tune-doubles.ts: a job queued
 * through a long GPU-worker outage keeps each run's history bounded, and
 * training attempts that keep moving the checkpoint forward do not end the job.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import { fineTuneWorkflowId } from '../../shared/fine-tunes';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../../shared/task-queues';
import type { fineTune as fineTuneWorkflow } from '../../workflows/fine-tunes';
import { acceleratorHostDouble } from '../helpers/cluster-doubles';
import { FineTuneActivityDoubles, fineTuneInput } from '../helpers/fine-tune-doubles';
import {
  workflowTestEnvForFile,
  historyLengths as historyLengthsOf,
  recordHistoryIfAsked,
  runWorkers,
  until,
} from '../helpers/workflow-env';

describe('fine-tune workflow decisions (time-skipping)', () => {
  const t = workflowTestEnvForFile();

  const historyLengths = (handle: WorkflowHandle) => historyLengthsOf(t.env, handle);

  // While a probe waits to be taken the test server keeps real time, so the probes here wait 1 s
  // each (a real installation doubles them up to 15 minutes) and a run continues as new after 3.
  test(
    'a job queued while no GPU worker serves its queue continues as new with bounded runs, then trains when one comes',
    { timeout: 90_000 },
    async (ctx) => {
      const doubles = new FineTuneActivityDoubles();
      const control = await t.worker(CONTROL_TASK_QUEUE, doubles.control());
      await runWorkers([control], async () => {
        const handle = await t.env.client.workflow.start<typeof fineTuneWorkflow>('fineTune', {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: fineTuneWorkflowId('ts-queued'),
          args: [fineTuneInput('ts-queued', { queueProbeSeconds: 1, maxQueueProbeSeconds: 1, probesPerRun: 3 })],
        });
        const runs = await until(
          () => historyLengths(handle),
          (r) => r.length >= 2,
          'a hand-over while queued',
          45_000,
        );
        ctx.diagnostic(`queued runs: ${runs.join(', ')} events`);
        // Three probes of a few events each, plus the start and the hand-over; the first run also tokenized.
        assert.ok(Math.max(...runs) < 60, `largest run ${Math.max(...runs)} events`);
        assert.equal(doubles.status, 'queued');
        const said = doubles.records.filter((r) => r.event?.dedupKey === 'no-gpu-worker');
        assert.equal(said.length, 1, 'the job says once that nobody serves its queue');

        const gpu = await t.worker(gpuTaskQueue('H100_SXM'), { ...doubles.training(), ...acceleratorHostDouble });
        await runWorkers([gpu], async () => {
          assert.equal(await t.finished(handle), 'completed');
        });
        assert.equal(doubles.status, 'completed');
        assert.deepEqual(doubles.attempts, [0], 'trained once, from the start');
        await recordHistoryIfAsked(handle, 'fineTune', 'queued-through-outage-continued-as-new-trained');
      });
    },
  );

  test(
    'attempts that keep saving checkpoints do not spend the job: a new round continues from the newest one',
    { timeout: 90_000 },
    async () => {
      const doubles = new FineTuneActivityDoubles();
      // Six lost attempts (a worker restarted, a trainer hung), each after a new checkpoint; the
      // activity's own budget is five.
      doubles.failures = [10, 20, 30, 40, 50, 60];
      const control = await t.worker(CONTROL_TASK_QUEUE, doubles.control());
      const gpu = await t.worker(gpuTaskQueue('H100_SXM'), { ...doubles.training(), ...acceleratorHostDouble });
      await runWorkers([control, gpu], async () => {
        const handle = await t.env.client.workflow.start<typeof fineTuneWorkflow>('fineTune', {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: fineTuneWorkflowId('ts-lost-attempts'),
          args: [fineTuneInput('ts-lost-attempts')],
        });
        const finished = t.finished<string>(handle);
        // The attempts' retry backoffs (2 s, doubling) pass in skipped time.
        while ((await handle.describe()).status.name === 'RUNNING') await t.advance(10_000, 2_000);
        assert.equal(await finished, 'completed');
        assert.equal(doubles.status, 'completed');
        assert.deepEqual(
          doubles.attempts,
          [0, 10, 20, 30, 40, 50, 60],
          'each attempt resumed from the newest checkpoint',
        );
        const continued = doubles.records.filter((r) => r.event?.dedupKey?.startsWith('continued-'));
        assert.deepEqual(
          continued.map((r) => r.event?.step),
          [50],
          'one new round of attempts, from step 50',
        );
        await recordHistoryIfAsked(handle, 'fineTune', 'attempts-spent-with-progress-continued');
      });
    },
  );
});
