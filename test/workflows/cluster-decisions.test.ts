/**
 * The cluster workflow's decisions, in Temporal's time-skipping test server
 * with the activity doubles of test/helpers/cluster-doubles.ts: what it does
 * when a preemption notice arrives mid scale-up, when a remediation child
 * fails or cannot start, when a node test keeps failing, when
 * it is deleted during a replacement, and when its run is cancelled. Waits of
 * minutes pass in about a second. (A terminated child is tested on the
 * real server in test/clusters/cluster-repair.test.ts: the test server does
 * not tell a parent that its child was terminated.)
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import {
  CLUSTER_MESSAGES,
  MAX_NODE_PHASE_TRANSITIONS,
  clusterWorkflowId,
  remediationWorkflowId,
  type ClusterState,
} from '../../shared/clusters';
import { SA_PHASE, SA_STATUS } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE, gpuTaskQueue } from '../../shared/task-queues';
import type { cluster as clusterWorkflow } from '../../workflows/clusters';
import { ClusterActivityDoubles, acceleratorHostDouble, clusterInput } from '../helpers/cluster-doubles';
import type { Worker, WorkerOptions } from '@temporalio/worker';
import {
  workflowTestEnvForFile,
  historyLengths as historyLengthsOf,
  inTime,
  recordHistoryIfAsked,
  runWorkers,
  until,
} from '../helpers/workflow-env';

type GpuWorkerOptions = Pick<WorkerOptions, 'maxConcurrentActivityTaskExecutions'>;

/** A promise the test resolves when it lets a held activity go on. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

// How long a probe waits for a GPU worker before its queue counts as unserved. The test server
// does not skip time while an activity task waits for a poller, so this wait passes in real time
// at every probe of a simulated outage: at 1 s it was most of the outage tests' run time.
const QUEUE_WAIT_SECONDS = 0.1;

const events = (s: ClusterState | undefined, reason: string) =>
  (s?.node_lifecycle_events ?? []).filter((e) => e.reason === reason);

// The suite is long (about 150-180 s on two cores, most of it the simulated outages and days of
// flapping); each test keeps its own timeout, and the suite gets room for all of them, so one
// slow test fails alone instead of cancelling the rest at the runner's 300 s default.
describe('cluster workflow decisions (time-skipping)', { timeout: 600_000 }, () => {
  // One server for the file: each test ends with its workers stopped and its runs terminated.
  const t = workflowTestEnvForFile();
  /** The GPU workers of the current test (what the poller-list double reads). */
  let gpuHosts: Worker[] = [];

  /** A worker on the GPU queue, as an accelerator host runs one. */
  async function gpuHost(doubles: ClusterActivityDoubles, options?: GpuWorkerOptions): Promise<Worker> {
    const w = await t.worker(gpuTaskQueue('H100_SXM'), { ...doubles.activities(), ...acceleratorHostDouble }, options);
    gpuHosts.push(w);
    return w;
  }

  async function withCluster(
    id: string,
    opts: Parameters<typeof clusterInput>[1] & {
      gpuWorker?: boolean;
      gpuWorkerOptions?: GpuWorkerOptions;
      workflowTaskTimeout?: string;
    },
    body: (ctx: {
      doubles: ClusterActivityDoubles;
      handle: WorkflowHandle<typeof clusterWorkflow>;
      gpu?: Worker;
    }) => Promise<void>,
  ) {
    const doubles = new ClusterActivityDoubles();
    const activities = { ...doubles.activities(), ...acceleratorHostDouble };
    const control = await t.worker(CONTROL_TASK_QUEUE, activities);
    gpuHosts = [];
    // What Temporal's poller list would say: some GPU worker of this test is running.
    doubles.queuePolled = () => gpuHosts.some((w) => w.getState() === 'RUNNING');
    const gpu = opts.gpuWorker === false ? undefined : await gpuHost(doubles, opts.gpuWorkerOptions);
    await runWorkers(gpu ? [control, gpu] : [control], async () => {
      const handle = await t.env.client.workflow.start<typeof clusterWorkflow>('cluster', {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: clusterWorkflowId(id),
        args: [clusterInput(id, opts)],
        workflowTaskTimeout: opts.workflowTaskTimeout,
      });
      t.watch(handle);
      await body({ doubles, handle, gpu });
    });
  }

  const ready = (d: ClusterActivityDoubles) =>
    until(
      () => d.latest,
      (s) => s?.phase === 'CLUSTER_PHASE_READY',
      'the cluster to be Ready',
    );

  /**
   * The run has nothing in flight: by its history, its last workflow task completed and every
   * activity it scheduled has closed. (Read from the history: the test server's describe lists no
   * pending workflow task.) Time skipping is locked between advances, so from then on it does
   * nothing until the test moves the clock: what it has done is what it decided.
   */
  const idle = (handle: WorkflowHandle) =>
    until(
      async () => (await handle.fetchHistory()).events ?? [],
      (events) => {
        const tasks = events.filter(
          (e) =>
            e.workflowTaskScheduledEventAttributes ||
            e.workflowTaskStartedEventAttributes ||
            e.workflowTaskCompletedEventAttributes ||
            e.workflowTaskFailedEventAttributes ||
            e.workflowTaskTimedOutEventAttributes,
        );
        const open = new Set(
          events.filter((e) => e.activityTaskScheduledEventAttributes).map((e) => String(e.eventId)),
        );
        for (const e of events) {
          const closed =
            e.activityTaskCompletedEventAttributes ??
            e.activityTaskFailedEventAttributes ??
            e.activityTaskTimedOutEventAttributes ??
            e.activityTaskCanceledEventAttributes;
          if (closed) open.delete(String(closed.scheduledEventId));
        }
        return Boolean(tasks.at(-1)?.workflowTaskCompletedEventAttributes) && open.size === 0;
      },
      `${handle.workflowId} to have nothing in flight`,
    );

  /** Deletes the cluster and checks that it ends with nothing of it left held. */
  async function deleteAndCheck(handle: WorkflowHandle<typeof clusterWorkflow>, doubles: ClusterActivityDoubles) {
    const deleting = handle.executeUpdate(CLUSTER_MESSAGES.delete, { args: [{ reason: 'test over' }] });
    await inTime(deleting, 45_000, 'the delete update', handle);
    assert.equal(await t.finished(handle), 'deleted');
    assert.deepEqual([...doubles.live], [], 'every node is released');
  }

  test(
    'a preemption notice that arrives during a scale-up is cordoned within seconds, released after its grace',
    { timeout: 60_000 },
    async () => {
      await withCluster('ts-preempt-scale', { gpus: 16 }, async ({ doubles, handle }) => {
        await ready(doubles);
        const [first] = doubles.latest!.gpu_worker_nodes;

        // The scale-up's new nodes take their time to boot: awaitNodes is held.
        const booting = gate();
        doubles.on('awaitNodes', () => booting.wait);
        await inTime(
          handle.executeUpdate(CLUSTER_MESSAGES.update, { args: [{ num_gpus: 32 }] }),
          30_000,
          'the resize',
          handle,
        );
        await until(
          () => doubles.count('awaitNodes'),
          (n) => n >= 3,
          'the scale-up to wait on its new nodes',
        );

        const noticed = Date.now();
        await handle.signal(CLUSTER_MESSAGES.preemptionNotice, { nodeId: first.node_id });
        await until(
          () => doubles.cordoned.has(first.node_id),
          Boolean,
          `${first.node_id} to be cordoned while the scale-up still waits`,
          5_000,
        );
        assert.ok(Date.now() - noticed < 5_000, 'cordoned within seconds');
        assert.equal(doubles.count('awaitNodes'), 3, 'the scale-up was still waiting on its nodes');
        assert.ok(doubles.live.has(first.node_id), 'the node keeps its grace period');

        doubles.on('awaitNodes', undefined);
        booting.open();
        await t.advance(301_000);
        const s = await until(
          () => doubles.latest,
          (x) => events(x, 'ServicePreempted').length === 1,
          'the drained node to be removed after 300 s',
        );
        assert.ok(!doubles.live.has(first.node_id), 'released after the grace period');
        assert.ok(!s.gpu_worker_nodes.some((n) => n.node_id === first.node_id));
        await deleteAndCheck(handle, doubles);
        await recordHistoryIfAsked(handle, 'cluster', 'preemption-notice-during-scale-up-drained-at-once');
      });
    },
  );

  test('a resize that falls short waits for the health round to try again', { timeout: 60_000 }, async () => {
    await withCluster('ts-resize-short', { gpus: 16 }, async ({ doubles, handle }) => {
      await ready(doubles);
      // The first two nodes offered for the third slot fail to boot.
      doubles.bootFailures.add('gpu-ts-resize-short-3');
      doubles.bootFailures.add('gpu-ts-resize-short-4');
      await inTime(
        handle.executeUpdate(CLUSTER_MESSAGES.update, { args: [{ num_gpus: 24 }] }),
        30_000,
        'the resize',
        handle,
      );
      const short = await until(
        () => doubles.latest,
        (s) => events(s, 'NodeBootFailed').length === 1 && s!.phase !== 'CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES',
        'the failed boot to be reported',
      );
      assert.equal(short.gpu_worker_nodes.length, 2);
      const provisions = doubles.count('provisionNodes');
      // An unrelated update wakes the loop, which looks at the nodes again: its chance to retry. Once
      // the run has nothing in flight (no workflow task, no activity; the clock is held), it has
      // decided: no new attempt.
      await inTime(
        handle.executeUpdate(CLUSTER_MESSAGES.update, { args: [{ auto_remediation_enabled: false }] }),
        30_000,
        'the unrelated update',
        handle,
      );
      await idle(handle);
      assert.equal(doubles.count('provisionNodes'), provisions, 'no new attempt before the health round');
      assert.equal(events(doubles.latest, 'NodeBootFailed').length, 1, 'no other node tried');

      // The health round tries again (node 4 fails too) and, having looked at the nodes, once more (node 5).
      await t.advance(61_000);
      const grown = await until(
        () => doubles.latest,
        (s) => s?.phase === 'CLUSTER_PHASE_READY' && s.gpu_worker_nodes.length === 3,
        'the resize to be completed in the health round',
      );
      assert.deepEqual(
        grown.gpu_worker_nodes.map((n) => n.node_id),
        ['gpu-ts-resize-short-1', 'gpu-ts-resize-short-2', 'gpu-ts-resize-short-5'],
      );
      assert.equal(events(grown, 'NodeBootFailed').length, 2);
      assert.equal(doubles.count('runHealthCheck'), 2, 'the round checked the two live nodes');
      await deleteAndCheck(handle, doubles);
      await recordHistoryIfAsked(handle, 'cluster', 'resize-fell-short-twice-completed-in-health-round');
    });
  });

  test('a remediation child that fails leaves the cluster serving', { timeout: 60_000 }, async () => {
    await withCluster('ts-rem-failed', { gpus: 16 }, async ({ doubles, handle }) => {
      await ready(doubles);
      const [node] = doubles.latest!.gpu_worker_nodes;
      // The remediation's own records fail for good (a bug, a lost database): the child fails, and so does
      // its last attempt to say so. The cluster's record of the outcome goes through.
      let childFailures = 0;
      doubles.on('recordRemediation', (r: { state: string }) => {
        if (r.state === 'RUNNING' || (r.state === 'FAILED' && childFailures++ === 0)) {
          throw ApplicationFailure.nonRetryable('remediation store unavailable', 'InjectedFault');
        }
      });
      await handle.executeUpdate(CLUSTER_MESSAGES.createRemediation, {
        args: [
          {
            remediationId: 'rem-failed',
            instanceId: node.instance_id,
            mode: 'REMEDIATION_MODE_REBOOT_VM',
            requestedBy: 'test',
          },
        ],
      });
      const failed = await until(
        () => doubles.remediations.get('rem-failed'),
        (r) => r?.state === 'FAILED',
        'the remediation to be recorded FAILED by the cluster',
      );
      assert.match(failed.error_message ?? '', /remediation store unavailable/);
      const child = await t.env.client.workflow
        .getHandle(remediationWorkflowId('ts-rem-failed', 'rem-failed'))
        .describe();
      assert.equal(child.status.name, 'FAILED');
      doubles.on('recordRemediation', undefined);

      // Still serving: an update is accepted and applied, and a new remediation of the node runs.
      await inTime(
        handle.executeUpdate(CLUSTER_MESSAGES.update, { args: [{ num_gpus: 24 }] }),
        30_000,
        'the resize',
        handle,
      );
      await until(
        () => doubles.latest,
        (s) => s?.counts.num_gpus === 24 && s.gpu_worker_nodes.length === 3,
        'the resize to 24 GPUs',
      );
      const again = await handle.executeUpdate(CLUSTER_MESSAGES.createRemediation, {
        args: [
          {
            remediationId: 'rem-again',
            instanceId: node.instance_id,
            mode: 'REMEDIATION_MODE_REBOOT_VM',
            requestedBy: 'test',
          },
        ],
      });
      assert.equal((again as { state: string }).state, 'PENDING');
      await until(
        () => doubles.remediations.get('rem-again'),
        (r) => r?.state === 'SUCCEEDED',
        'the second remediation to succeed',
      );
      await deleteAndCheck(handle, doubles);
      await recordHistoryIfAsked(handle, 'cluster', 'remediation-child-failed-cluster-serves');
    });
  });

  test('a remediation whose workflow id is already taken fails; the cluster goes on', { timeout: 60_000 }, async () => {
    await withCluster('ts-rem-taken', { gpus: 8 }, async ({ doubles, handle }) => {
      await ready(doubles);
      const [node] = doubles.latest!.gpu_worker_nodes;
      // Something already runs under the child's id (a stray run; nothing serves its queue).
      const squatter = await t.env.client.workflow.start('nodeRemediation', {
        taskQueue: 'nobody-serves-this',
        workflowId: remediationWorkflowId('ts-rem-taken', 'rem-taken'),
        args: [{}],
      });
      await handle.executeUpdate(CLUSTER_MESSAGES.createRemediation, {
        args: [
          {
            remediationId: 'rem-taken',
            instanceId: node.instance_id,
            mode: 'REMEDIATION_MODE_REBOOT_VM',
            requestedBy: 'test',
          },
        ],
      });
      const failed = await until(
        () => doubles.remediations.get('rem-taken'),
        (r) => r?.state === 'FAILED',
        'the remediation to be recorded FAILED',
      );
      assert.match(failed.error_message ?? '', /already/i);
      const s = await until(
        () => doubles.latest,
        (x) => events(x, 'RemediationFailed').length === 1,
        'the failure to be an event',
      );
      assert.equal(s.remediations.length, 0, 'the remediation is closed');
      await squatter.terminate('test over');
      await deleteAndCheck(handle, doubles);
    });
  });

  test(
    'a health check whose retries are spent marks the node Unknown; the next good round clears it',
    { timeout: 60_000 },
    async () => {
      await withCluster('ts-health-unavailable', { gpus: 16 }, async ({ doubles, handle }) => {
        await ready(doubles);
        doubles.fail('runHealthCheck', 'DCGM agent unreachable');
        await t.advance(61_000);
        const s = await until(
          () => doubles.latest,
          (x) => x?.phase === 'CLUSTER_PHASE_DEGRADED',
          'the cluster to be Degraded with nodes of unknown health',
        );
        assert.deepEqual(
          s.gpu_worker_nodes.map((n) => n.status),
          ['Unknown', 'Unknown'],
        );
        assert.equal(events(s, 'HealthCheckUnavailable').length, 2);
        assert.equal((await handle.describe()).status.name, 'RUNNING');

        doubles.on('runHealthCheck', undefined);
        await t.advance(61_000);
        const healed = await until(
          () => doubles.latest,
          (x) => x?.phase === 'CLUSTER_PHASE_READY',
          'the cluster to be Ready again',
        );
        assert.deepEqual(
          healed.gpu_worker_nodes.map((n) => n.status),
          ['Ready', 'Ready'],
        );
        await deleteAndCheck(handle, doubles);
        await recordHistoryIfAsked(handle, 'cluster', 'health-check-unavailable-then-recovered');
      });
    },
  );

  test(
    'deleting the cluster during a replacement cancels it and leaves no node behind',
    { timeout: 60_000 },
    async () => {
      await withCluster('ts-delete-replacing', { gpus: 16 }, async ({ doubles, handle }) => {
        await ready(doubles);
        const [node] = doubles.latest!.gpu_worker_nodes;
        const replacementBoot = gate();
        let replacement = '';
        doubles.on('awaitNodes', (a: { nodeIds: string[] }) => {
          if (a.nodeIds.some((id) => !doubles.latest!.gpu_worker_nodes.some((n) => n.node_id === id))) {
            replacement = a.nodeIds[0];
            return replacementBoot.wait;
          }
        });
        await handle.executeUpdate(CLUSTER_MESSAGES.createRemediation, {
          args: [
            {
              remediationId: 'rem-replace',
              instanceId: node.instance_id,
              mode: 'REMEDIATION_MODE_VM_ONLY',
              requestedBy: 'test',
            },
          ],
        });
        await until(() => replacement, Boolean, 'the replacement node to be provisioned and booting');
        assert.ok(doubles.live.has(replacement));

        const deleting = handle.executeUpdate(CLUSTER_MESSAGES.delete, { args: [{ reason: 'test over' }] });
        await inTime(deleting, 45_000, 'the delete update', handle);
        assert.equal(await t.finished(handle), 'deleted');
        replacementBoot.open();
        assert.deepEqual([...doubles.live], [], 'no node is left held');
        assert.deepEqual(doubles.swept, [], 'the remediation released its replacement itself');
        assert.ok(doubles.released.has(replacement));
        assert.equal(doubles.remediations.get('rem-replace')?.state, 'CANCELLED');
        const child = await t.env.client.workflow
          .getHandle(remediationWorkflowId('ts-delete-replacing', 'rem-replace'))
          .describe();
        assert.equal(child.status.name, 'CANCELLED');
        await recordHistoryIfAsked(handle, 'cluster', 'deleted-during-replacement-remediation-cancelled');
        await recordHistoryIfAsked(
          t.env.client.workflow.getHandle(remediationWorkflowId('ts-delete-replacing', 'rem-replace')),
          'nodeRemediation',
          'replacement-cancelled-by-cluster-delete',
        );
        // Its search attributes say how it ended (the remediation-status patch).
        assert.equal(child.typedSearchAttributes.get(SA_PHASE), 'done');
        assert.equal(child.typedSearchAttributes.get(SA_STATUS), 'CANCELLED');
        await recordHistoryIfAsked(
          t.env.client.workflow.getHandle(remediationWorkflowId('ts-delete-replacing', 'rem-replace')),
          'nodeRemediation',
          'replacement-cancelled-says-it-ended',
        );
      });
    },
  );

  test('a cancelled cluster run releases its nodes before it ends', { timeout: 60_000 }, async () => {
    await withCluster('ts-cancelled-run', { gpus: 16 }, async ({ doubles, handle }) => {
      await ready(doubles);
      assert.equal(doubles.live.size, 3);
      await handle.cancel();
      await assert.rejects(t.finished(handle), WorkflowFailedError);
      assert.deepEqual([...doubles.live], [], 'every node is released');
      assert.equal(doubles.latest?.phase, 'CLUSTER_PHASE_DELETING');
      assert.match(doubles.latest?.deletion_reason ?? '', /failed/);
      // Operators find it failed, not done as its teardown's Deleting said (issue 44).
      const ended = await handle.describe();
      assert.equal(ended.typedSearchAttributes.get(SA_STATUS), 'Failed');
      assert.equal(ended.typedSearchAttributes.get(SA_PHASE), 'failed');
      await recordHistoryIfAsked(handle, 'cluster', 'run-cancelled-nodes-released');
      await recordHistoryIfAsked(handle, 'cluster', 'run-cancelled-says-failed');
    });
  });

  test(
    'a run started to delete a cluster whose workflow was gone tears it down from its last state',
    { timeout: 60_000 },
    async () => {
      await withCluster('ts-orphan', { gpus: 16 }, async ({ doubles, handle }) => {
        await ready(doubles);
        await handle.terminate('operator');
        assert.equal(doubles.live.size, 3, 'the terminated run released nothing');
        const last = doubles.latest!;
        const teardown = await t.env.client.workflow.start<typeof clusterWorkflow>('cluster', {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: clusterWorkflowId('ts-orphan'),
          args: [
            { ...clusterInput('ts-orphan', { gpus: 16 }), carried: last, deleteOnStart: 'deleted through the API' },
          ],
        });
        assert.equal(await t.finished(teardown), 'deleted');
        assert.deepEqual([...doubles.live], []);
        assert.equal(doubles.count('provisionNodes'), 2, 'nothing new was provisioned');
        assert.equal(doubles.latest?.deletion_reason, 'deleted through the API');
        const ended = await teardown.describe();
        assert.equal(ended.typedSearchAttributes.get(SA_STATUS), 'Deleted');
        assert.equal(ended.typedSearchAttributes.get(SA_PHASE), 'done');
        await recordHistoryIfAsked(teardown, 'cluster', 'torn-down-after-its-workflow-was-gone');
        await recordHistoryIfAsked(teardown, 'cluster', 'torn-down-says-deleted');
      });
    },
  );

  const historyLengths = (handle: WorkflowHandle) => historyLengthsOf(t.env, handle);

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
            (s) => events(s, 'AcceleratorQueueUnserved').length > 0,
            'the cluster to say nobody serves its GPU queue',
          );
          const [before] = await historyLengths(handle);
          await t.advance(3 * 3600_000, 60_000);
          const s = doubles.latest!;
          assert.equal(s.phase, 'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS', 'still waiting to test its nodes');
          assert.equal(events(s, 'AcceleratorQueueUnserved').length, 1, 'said once');
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
          assert.deepEqual(events(s, 'AcceleratorQueueUnserved'), [], 'a busy queue is not an unserved one');
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
            (s) => events(s, 'AcceleratorQueueUnserved').length > 0,
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
          assert.equal(events(s, 'AcceleratorQueueUnserved').length, 1, 'said once, across runs');
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
    'a node whose health flaps for days: every failure is rebooted, and the carried state stays bounded',
    { timeout: 600_000 },
    async (ctx) => {
      // GANTRY_FLAP_DAYS=30 measures the simulated month of the closing note; the suite runs a few days.
      const days = Number(process.env.GANTRY_FLAP_DAYS ?? 4);
      await withCluster(
        'ts-flapping',
        {
          gpus: 16,
          settings: { healthCheckIntervalSeconds: 3600, maxRoundsPerRun: 50 },
          workflowTaskTimeout: '2 minutes',
        },
        async ({ doubles, handle }) => {
          await ready(doubles);
          const flapping = doubles.latest!.gpu_worker_nodes[0].node_id;
          let checks = 0;
          doubles.healthy = (nodeId) => nodeId !== flapping || ++checks % 2 === 0;
          const size = (s: ClusterState) => JSON.stringify(s).length;
          const sizeByDay: number[] = [];
          for (let day = 1; day <= days; day++) {
            await t.advance(86_400_000, 3_600_000);
            sizeByDay.push(Math.max(...doubles.states.map(size)));
          }
          const reboots = [...doubles.remediations.values()].filter(
            (r) => r.instance_name === flapping && r.state === 'SUCCEEDED',
          ).length;
          const s = doubles.latest!;
          const node = s.gpu_worker_nodes.find((n) => n.node_id === flapping)!;
          const runs = await historyLengths(handle);
          ctx.diagnostic(
            `${days} simulated days, ${reboots} reboots: largest carried state by day ${sizeByDay.join(', ')} bytes; ` +
              `${node.phase_transitions.length} phase transitions on the node, ${s.node_lifecycle_events.length} events; ` +
              `${runs.length} runs, largest ${Math.max(...runs)} events`,
          );
          assert.ok(reboots >= days * 10, `every other hourly check fails and is rebooted (${reboots})`);
          // The bound: lifecycle events, cluster phases, deleted nodes and each node's phases are capped
          // (shared/clusters.ts), so what one run hands the next stops growing once the caps are reached.
          assert.ok(Math.max(...sizeByDay) < 128 * 1024, `largest carried state ${Math.max(...sizeByDay)} bytes`);
          // Before the per-node cap it grew by about 1.8 KB a day for as long as the node flapped.
          assert.ok(
            sizeByDay.at(-1)! <= sizeByDay.at(-2)! * 1.01,
            `no growth once the caps are reached: ${sizeByDay.slice(-2).join(' -> ')} bytes`,
          );
          assert.ok(node.phase_transitions.length <= MAX_NODE_PHASE_TRANSITIONS, 'a node keeps its latest phases only');
          assert.equal(node.phase_transitions[0].phase, 'NODE_PHASE_RUNNING', 'and its first one');
          assert.ok(Math.max(...runs) < 2_000, `largest run ${Math.max(...runs)} events`);
          assert.equal(node.status, 'Ready');
          await deleteAndCheck(handle, doubles);
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
          assert.equal(events(s, 'AcceleratorQueueUnserved').length, 1, 'said once');
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
              (x) => events(x, 'AcceleratorQueueServed').length === 1 && doubles.count('runHealthCheck') > checks,
              'the health rounds to resume',
            );
            await deleteAndCheck(handle, doubles);
          });
        },
      );
    },
  );
});
