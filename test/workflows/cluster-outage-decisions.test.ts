/**
 * The cluster workflow over simulated hours and days, in Temporal's time-skipping test server with
 * the activity doubles of test/helpers/cluster-doubles.ts: a GPU queue nobody serves during bring-up
 * or while running (bounded histories, hand-over to a worker that comes back), and a busy queue told
 * from an unserved one. (A node whose health flaps for days: cluster-flapping-node.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { QUEUE_WAIT_SECONDS, clusterWorkflowKit, gate, lifecycleEvents } from '../helpers/cluster-workflow-kit';
import { recordHistoryIfAsked, runWorkers, until, workflowTestEnvForFile } from '../helpers/workflow-env';

// The suite is long (the simulated outages); each test keeps its own timeout,
// and the suite gets room for all of them, so one slow test fails alone instead of cancelling the
// rest at the runner's 300 s default.
describe('cluster workflow outages (time-skipping)', { timeout: 600_000 }, () => {
  // One server for the file: each test ends with its workers stopped and its runs terminated.
  const t = workflowTestEnvForFile();
  const { withCluster, gpuHost, ready, deleteAndCheck, historyLengths } = clusterWorkflowKit(t);

  // The outage tests use a 1 s wait for a GPU worker: while an activity waits to be taken, the test
  // server keeps real time, so the probes' waits (timers) are what time skipping passes over.
  test(
    'a GPU queue unserved during bring-up: one backing-off probe for the cluster, history bounded',
    { timeout: 120_000 },
    async (ctx) => {
      await withCluster(
        'ts-outage-bring-up',
        {
          gpus: 16,
          gpuWorker: false,
          workflowTaskTimeout: '2 minutes',
          settings: { gpuQueueWaitSeconds: QUEUE_WAIT_SECONDS },
        },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.latest,
            (s) => lifecycleEvents(s, 'AcceleratorQueueUnserved').length > 0,
            'the cluster to say nobody serves its GPU queue',
          );
          const [before] = await historyLengths(handle);
          await t.advance(3 * 3600_000, 60_000);
          const s = doubles.latest!;
          assert.equal(s.phase, 'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS', 'still waiting to test its nodes');
          assert.equal(lifecycleEvents(s, 'AcceleratorQueueUnserved').length, 1, 'said once');
          const [after] = await historyLengths(handle);
          ctx.diagnostic(`bring-up outage: ${after - before} history events in 3 simulated hours (${after} in all)`);
          // One probe for the cluster, backing off to one every 15 minutes: about 14 in 3 hours.
          assert.ok(after - before < 250, `${after - before} events in 3 simulated hours`);
          assert.equal(doubles.count('runAcceptanceTests'), 0, 'no node test ran without a worker');
          await deleteAndCheck(handle, doubles);
          await recordHistoryIfAsked(handle, 'cluster', 'gpu-queue-unserved-during-bring-up-deleted');
          await recordHistoryIfAsked(handle, 'cluster', 'gpu-queue-without-pollers-unserved-deleted');
          assert.ok(doubles.count('acceleratorQueuePolled') >= 1, 'it asked whether a host polls the queue');
        },
      );
    },
  );

  test(
    'a busy GPU queue (hosts poll it, every slot taken) is waited on for a slot, not reported unserved',
    { timeout: 60_000 },
    async () => {
      await withCluster(
        'ts-busy-queue',
        {
          gpus: 16,
          settings: { gpuQueueWaitSeconds: QUEUE_WAIT_SECONDS },
          // One slot: while the first acceptance test holds it, the second one's wait for a worker runs out.
          gpuWorkerOptions: { maxConcurrentActivityTaskExecutions: 1 },
        },
        async ({ doubles, handle }) => {
          const held = gate();
          doubles.on('runAcceptanceTests', () => held.wait);
          await until(
            () => doubles.count('acceleratorQueuePolled'),
            (n) => n >= 2,
            'the waiting test to find the queue polled, twice',
          );
          held.open();
          const s = await ready(doubles);
          assert.deepEqual(lifecycleEvents(s, 'AcceleratorQueueUnserved'), [], 'a busy queue is not an unserved one');
          assert.equal(doubles.count('runAcceptanceTests'), 2, 'each node tested once, when a slot came free');
          assert.deepEqual(
            s.gpu_worker_nodes.map((n) => n.status),
            ['Ready', 'Ready'],
          );
          await deleteAndCheck(handle, doubles);
          await recordHistoryIfAsked(handle, 'cluster', 'busy-gpu-queue-waited-for-a-slot-deleted');
        },
      );
    },
  );

  test(
    'a GPU queue unserved during bring-up: the run continues as new every few probes, and bring-up finishes when a worker comes',
    { timeout: 120_000 },
    async (ctx) => {
      await withCluster(
        'ts-outage-bring-up-handover',
        {
          gpus: 16,
          gpuWorker: false,
          workflowTaskTimeout: '2 minutes',
          settings: { gpuQueueWaitSeconds: QUEUE_WAIT_SECONDS, bringUpProbesPerRun: 3 },
        },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.latest,
            (s) => lifecycleEvents(s, 'AcceleratorQueueUnserved').length > 0,
            'the cluster to say nobody serves its GPU queue',
          );
          const firstRun = (await handle.describe()).runId;
          await t.advance(20 * 60_000, 60_000);
          const runs = await historyLengths(handle);
          ctx.diagnostic(`bring-up outage, 20 simulated minutes: runs of ${runs.join(', ')} events`);
          assert.ok(runs.length >= 2, 'continued as new while waiting');
          assert.ok(Math.max(...runs) < 250, `largest run ${Math.max(...runs)} events`);
          const s = doubles.latest!;
          assert.equal(s.phase, 'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS', 'still waiting to test its nodes');
          assert.equal(lifecycleEvents(s, 'AcceleratorQueueUnserved').length, 1, 'said once, across runs');
          assert.equal(doubles.count('runAcceptanceTests'), 0, 'no node test ran without a worker');

          // A GPU worker comes: the tests run in the current run and bring-up finishes.
          const back = await gpuHost(doubles);
          await runWorkers([back], async () => {
            await t.advance(16 * 60_000, 60_000);
            await ready(doubles);
            assert.equal(doubles.latest!.gpu_worker_nodes.length, 2, 'the nodes provisioned before the hand-overs');
            await deleteAndCheck(handle, doubles);
          });
          await recordHistoryIfAsked(
            t.env.client.workflow.getHandle(handle.workflowId, firstRun),
            'cluster',
            'gpu-queue-unserved-bring-up-handed-over',
          );
          await recordHistoryIfAsked(handle, 'cluster', 'bring-up-resumed-after-hand-over-ready-deleted');
        },
      );
    },
  );

  test(
    'a running cluster whose GPU queue goes unserved skips health rounds, continues as new, and resumes when a worker is back',
    { timeout: 120_000 },
    async (ctx) => {
      await withCluster(
        'ts-outage-running',
        {
          gpus: 16,
          settings: { maxRoundsPerRun: 50, gpuQueueWaitSeconds: QUEUE_WAIT_SECONDS },
          workflowTaskTimeout: '2 minutes',
        },
        async ({ doubles, handle, gpu }) => {
          await ready(doubles);
          const firstRun = (await handle.describe()).runId;
          // The outage starts once the GPU worker is gone (its polls ended), not while it drains.
          gpu!.shutdown();
          await until(
            () => gpu!.getState(),
            (state) => state === 'STOPPED',
            'the GPU worker to stop',
          );
          await t.advance(3 * 3600_000, 60_000);
          const s = doubles.latest!;
          assert.equal(lifecycleEvents(s, 'AcceleratorQueueUnserved').length, 1, 'said once');
          assert.deepEqual(
            s.gpu_worker_nodes.map((n) => n.status),
            ['Ready', 'Ready'],
            'an unserved queue says nothing about the nodes',
          );
          const runs = await historyLengths(handle);
          ctx.diagnostic(`running outage: runs of ${runs.join(', ')} events over 3 simulated hours`);
          assert.notEqual((await handle.describe()).runId, firstRun, 'continued as new during the outage');
          assert.ok(Math.max(...runs) < 1_000, `largest run ${Math.max(...runs)} events`);

          // A GPU worker comes back: the probe gets through and the health rounds run again.
          const checks = doubles.count('runHealthCheck');
          const back = await gpuHost(doubles);
          await runWorkers([back], async () => {
            await t.advance(16 * 60_000, 60_000);
            await until(
              () => doubles.latest,
              (x) =>
                lifecycleEvents(x, 'AcceleratorQueueServed').length === 1 && doubles.count('runHealthCheck') > checks,
              'the health rounds to resume',
            );
            await deleteAndCheck(handle, doubles);
          });
        },
      );
    },
  );
  test(
    'a running cluster deleted while nobody serves its GPU queue is torn down: the pending probe ends quietly',
    { timeout: 120_000 },
    async () => {
      await withCluster(
        'ts-outage-deleted',
        { gpus: 16, settings: { gpuQueueWaitSeconds: QUEUE_WAIT_SECONDS }, workflowTaskTimeout: '2 minutes' },
        async ({ doubles, handle, gpu }) => {
          await ready(doubles);
          const run = (await handle.describe()).runId;
          gpu!.shutdown();
          await until(
            () => gpu!.getState(),
            (state) => state === 'STOPPED',
            'the GPU worker to stop',
          );
          // A health round finds the queue unserved and leaves the shared probe waiting, which no
          // node test awaits while the cluster runs. It is out at the delete: the run that started
          // it is the one deleted, and it never said the queue was served again.
          await t.advance(2 * 3600_000, 60_000);
          assert.equal(lifecycleEvents(doubles.latest!, 'AcceleratorQueueUnserved').length, 1);
          assert.equal(lifecycleEvents(doubles.latest!, 'AcceleratorQueueServed').length, 0);
          assert.equal((await handle.describe()).runId, run, 'the same run: the probe was not handed over');
          await deleteAndCheck(handle, doubles);
          await recordHistoryIfAsked(handle, 'cluster', 'running-gpu-queue-unserved-deleted');
        },
      );
    },
  );
});
