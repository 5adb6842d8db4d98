/**
 * The cluster workflow's decisions, in Temporal's time-skipping test server
 * with the activity doubles of test/helpers/cluster-doubles.ts: what it does
 * when a preemption notice arrives mid scale-up, when a resize falls short,
 * when a remediation child fails or cannot start, when a health check keeps
 * failing, when it is deleted during a replacement, when its run is cancelled,
 * and when it is deleted after its workflow was gone. Waits of minutes pass in
 * about a second. (A terminated child is tested on the real server in
 * test/clusters/cluster-repair.test.ts: the test server does not tell a parent
 * that its child was terminated.) Outages over hours and days:
 * cluster-outage-decisions.test.ts and cluster-flapping-node.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { CLUSTER_MESSAGES, clusterWorkflowId, remediationWorkflowId } from '../../shared/clusters';
import { SA_PHASE, SA_STATUS } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import type { cluster as clusterWorkflow } from '../../workflows/clusters';
import { clusterInput } from '../helpers/cluster-doubles';
import { clusterWorkflowKit, gate, lifecycleEvents } from '../helpers/cluster-workflow-kit';
import { inTime, recordHistoryIfAsked, until, workflowTestEnvForFile } from '../helpers/workflow-env';

describe('cluster workflow decisions (time-skipping)', { timeout: 300_000 }, () => {
  // One server for the file: each test ends with its workers stopped and its runs terminated.
  const t = workflowTestEnvForFile();
  const { withCluster, ready, idle, deleteAndCheck } = clusterWorkflowKit(t);

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
          (x) => lifecycleEvents(x, 'ServicePreempted').length === 1,
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
        (s) =>
          lifecycleEvents(s, 'NodeBootFailed').length === 1 &&
          s!.phase !== 'CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES',
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
      assert.equal(lifecycleEvents(doubles.latest, 'NodeBootFailed').length, 1, 'no other node tried');

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
      assert.equal(lifecycleEvents(grown, 'NodeBootFailed').length, 2);
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
      // Something already runs under the child's id (a stray run; nothing serves its queue). It
      // is started delayed, so it has no task pending when terminated: the test server would never
      // give that task's time lock back (sdk-java#1138), and the file's later tests need its clock.
      const squatter = await t.env.client.workflow.start('nodeRemediation', {
        taskQueue: 'nobody-serves-this',
        workflowId: remediationWorkflowId('ts-rem-taken', 'rem-taken'),
        args: [{}],
        startDelay: '365 days',
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
        (x) => lifecycleEvents(x, 'RemediationFailed').length === 1,
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
        assert.equal(lifecycleEvents(s, 'HealthCheckUnavailable').length, 2);
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
});
