/**
 * The deployment workflow's decisions in Temporal's time-skipping test server
 * with the activity doubles of test/helpers/deployment-doubles.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { WorkflowHandle } from '@temporalio/client';
import {
  CONTAINERS_TASK_QUEUE,
  DEPLOYMENT_MESSAGES,
  deploymentWorkflowId,
  type DeploymentWorkflowInput,
} from '../../shared/deployments';
import { SA_PHASE, SA_STATUS } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import type { deployment as deploymentWorkflow } from '../../workflows/deployments';
import { DeploymentActivityDoubles, deploymentInput } from '../helpers/deployment-doubles';
import { workflowTestEnvForFile, recordHistoryIfAsked, runWorkers, until } from '../helpers/workflow-env';

describe('deployment workflow decisions (time-skipping)', () => {
  const t = workflowTestEnvForFile();

  /**
   * Starts `input`'s deployment with the doubles on a control worker and (unless `host: false`) a
   * container host; `prepare` programs the doubles before the workflow starts.
   */
  async function withDeployment(
    input: DeploymentWorkflowInput,
    opts: { host?: boolean; prepare?: (d: DeploymentActivityDoubles) => void },
    body: (ctx: {
      doubles: DeploymentActivityDoubles;
      handle: WorkflowHandle<typeof deploymentWorkflow>;
    }) => Promise<void>,
  ): Promise<void> {
    const doubles = new DeploymentActivityDoubles();
    const activities = doubles.activities();
    const workers = [await t.worker(CONTROL_TASK_QUEUE, activities)];
    if (opts.host !== false) workers.push(await t.worker(CONTAINERS_TASK_QUEUE, activities));
    await runWorkers(workers, async () => {
      opts.prepare?.(doubles);
      const handle = await t.env.client.workflow.start<typeof deploymentWorkflow>('deployment', {
        taskQueue: CONTROL_TASK_QUEUE,
        workflowId: deploymentWorkflowId(input.deploymentId),
        args: [input],
      });
      await body({ doubles, handle });
    });
  }

  test(
    'HTTPAvgRequestDuration: a mean answer time three times the target asks for three times the replicas',
    { timeout: 60_000 },
    async () => {
      await withDeployment(
        {
          ...deploymentInput('ts-mean-duration', {
            min: 1,
            max: 4,
            autoscaling: { metric: 'HTTPAvgRequestDuration', target: 100, time_interval_minutes: 1 },
          }),
          autoscaleIntervalSeconds: 1,
        },
        { prepare: (d) => (d.meanRequestMs = 300) },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.latest,
            (s) => s?.status === 'Ready' && s.desired_replicas === 3,
            'the scale-up: 1 replica at 300 ms against 100 ms asks for 3',
          );
          assert.equal(doubles.running.size, 3);
          await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
          assert.equal(await t.finished(handle), 'deleted');
          // An operator's search for active work no longer lists it (issue 44).
          const ended = await handle.describe();
          assert.equal(ended.typedSearchAttributes.get(SA_STATUS), 'Deleted');
          assert.equal(ended.typedSearchAttributes.get(SA_PHASE), 'done');
          await recordHistoryIfAsked(handle, 'deployment', 'mean-request-duration-scaled-up');
          await recordHistoryIfAsked(handle, 'deployment', 'scaled-up-deleted-says-done');
        },
      );
    },
  );

  test(
    'an autoscaling metric that cannot be read skips the observation; the deployment keeps serving',
    { timeout: 60_000 },
    async () => {
      await withDeployment(
        {
          ...deploymentInput('ts-scrape-fails', {
            min: 1,
            max: 3,
            autoscaling: { metric: 'CustomMetric', custom_metric_name: 'inflight', target: 10 },
          }),
          autoscaleIntervalSeconds: 1,
        },
        { prepare: (d) => (d.metric = new Error('GET /metrics: connection refused')) },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.scrapes,
            (n) => n >= 1,
            'the first observation',
          );
          // (A supervised replica is an activity in flight, and the test server does not skip time past it:
          // observations come every second here instead, in real time.)
          await until(
            () => doubles.scrapes,
            (n) => n >= 3,
            'more observations',
          );
          assert.equal((await handle.describe()).status.name, 'RUNNING');
          assert.equal(doubles.running.size, 1, 'the replica stays as it was');
          assert.equal(doubles.latest?.status, 'Ready');

          // The metric comes back: 25 in flight against a target of 10 per replica asks for 3.
          doubles.metric = 25;
          await until(
            () => doubles.latest,
            (s) => s?.status === 'Ready' && s.desired_replicas === 3,
            'the scale-up the readable metric asks for',
          );
          assert.equal(doubles.running.size, 3);

          // The workflow's own bounds decide what a change may do (the API's copy can lag behind).
          await assert.rejects(
            handle.executeUpdate(DEPLOYMENT_MESSAGES.update, { args: [{ max_replicas: 0 }] }),
            (err: Error & { cause?: { type?: string; details?: unknown[] } }) => {
              assert.equal(err.cause?.type, 'InvalidArgument');
              assert.deepEqual(err.cause?.details, ['max_replicas']);
              return true;
            },
          );

          await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
          assert.equal(await t.finished(handle), 'deleted');
          assert.equal(doubles.running.size, 0, 'every replica stopped');
          // (recorded first as metric-unreadable-observations-skipped-then-scaled, before replica ids carried the deployment id)
          await recordHistoryIfAsked(handle, 'deployment', 'metric-unreadable-skipped-replica-ids-per-deployment');
        },
      );
    },
  );

  test(
    'with no container host a launch fails NoContainerHost and is retried after a backoff; delete still ends it',
    { timeout: 60_000 },
    async () => {
      await withDeployment(
        { ...deploymentInput('ts-no-host', { min: 1, max: 1 }), containerWaitSeconds: 1 },
        { host: false },
        async ({ doubles, handle }) => {
          const failed = await until(
            () => doubles.replicaRecords.filter((r) => r.reason === 'NoContainerHost'),
            (rs) => rs.length >= 2,
            'two launches to fail for want of a container host',
          );
          assert.equal(failed[0].status, 'Failed');
          assert.match(failed[0].message ?? '', /No container host took the replica/);
          assert.notEqual(failed[0].replicaId, failed[1].replicaId, 'each attempt is a new replica');
          assert.equal((await handle.describe()).status.name, 'RUNNING');
          await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
          assert.equal(await t.finished(handle), 'deleted');
          await recordHistoryIfAsked(handle, 'deployment', 'no-container-host-launches-failed-deleted');
        },
      );
    },
  );

  test(
    'a supervisor that stops heartbeating is re-attached to its replica; no second replica starts beside it',
    { timeout: 90_000 },
    async () => {
      await withDeployment(
        deploymentInput('ts-quiet-host', { min: 1, max: 1 }),
        { prepare: (d) => (d.silent = 'ts-quiet-host-1') },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.latest,
            (s) => s?.status === 'Ready',
            'the first replica',
          );
          // The supervision activity's 15 s heartbeat timeout: while it runs, the server's clock
          // is held and passes as real time, so this waits about 15 s (advancing would take no less).
          await until(
            () => doubles.supervisions,
            (s) => s.length >= 2,
            'a second supervisor for the quiet replica',
            45_000,
          );
          assert.deepEqual(
            doubles.supervisions,
            ['ts-quiet-host-1', 'ts-quiet-host-1'],
            'the same replica, watched again',
          );
          assert.deepEqual(doubles.launches, ['ts-quiet-host-1'], 'no replacement was launched');
          assert.equal(doubles.latest?.status, 'Ready');
          await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
          assert.equal(await t.finished(handle), 'deleted');
          assert.equal(doubles.running.size, 0, 'the replica was stopped through its new supervisor');
          await recordHistoryIfAsked(handle, 'deployment', 'supervisor-heartbeat-timeout-reattached');
        },
      );
    },
  );

  test(
    'a supervisor whose host shuts down to restart is re-attached to its replica; no replacement is launched',
    { timeout: 60_000 },
    async () => {
      await withDeployment(
        deploymentInput('ts-host-restart', { min: 1, max: 1 }),
        { prepare: (d) => (d.restarting = 'ts-host-restart-1') },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.supervisions,
            (s) => s.length >= 2,
            'a second supervisor for the replica its host left running',
          );
          assert.deepEqual(doubles.supervisions, ['ts-host-restart-1', 'ts-host-restart-1']);
          assert.deepEqual(doubles.launches, ['ts-host-restart-1'], 'no replacement was launched');
          await until(
            () => doubles.latest,
            (s) => s?.status === 'Ready',
            'the deployment Ready on its one replica',
          );
          await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
          assert.equal(await t.finished(handle), 'deleted');
          assert.equal(doubles.running.size, 0, 'the replica was stopped through its new supervisor');
          await recordHistoryIfAsked(handle, 'deployment', 'host-restarted-supervisor-reattached');
        },
      );
    },
  );

  test(
    'an activity that gives up fails the run only after its replicas are stopped and Failed is projected',
    { timeout: 60_000 },
    async () => {
      await withDeployment(deploymentInput('ts-gives-up', { min: 2, max: 2 }), {}, async ({ doubles, handle }) => {
        await until(
          () => doubles.latest,
          (s) => s?.status === 'Ready',
          'two replicas',
        );
        assert.equal(doubles.running.size, 2);
        doubles.failProjectionsFrom = doubles.projections.length;
        // A signal wakes the main loop (its handler projects nothing), whose projection then fails for good.
        await handle.signal('setReplicaBounds', { min_replicas: 2, max_replicas: 2 });
        await assert.rejects(t.finished(handle), (err: Error) => {
          let root: unknown = err;
          while (root instanceof Error && root.cause) root = root.cause;
          assert.match((root as Error).message, /read model refused/, 'the run fails with what went wrong');
          return true;
        });
        assert.equal(doubles.running.size, 0, 'no replica left running unowned');
        assert.equal(doubles.latest?.status, 'Failed');
        await recordHistoryIfAsked(handle, 'deployment', 'projection-gave-up-replicas-stopped-failed');
      });
    },
  );
  // A launch that fails is retried after a backoff of 1 s. The round that follows projects the
  // deployment's status before it sleeps until the retry: a projection slower than what is left of
  // the backoff must not leave the loop asleep with no timer (the whole-platform crash test's rollout
  // stayed mid-way for good in CI this way, its new replica never launched again).
  test(
    'a launch retried after its backoff even when the projection before the sleep outlasts the backoff',
    { timeout: 60_000 },
    async () => {
      await withDeployment(
        deploymentInput('ts-slow-read-model', { min: 1, max: 1 }),
        {
          prepare: (d) => {
            d.failLaunches = 1;
            // The projection right after the failed launch, before the loop sleeps, outlasts the backoff.
            d.projectionDelayMs = (n) => (n === 1 ? 1500 : 0);
          },
        },
        async ({ doubles, handle }) => {
          await until(
            () => doubles.latest,
            (s) => s?.status === 'Ready',
            'the deployment Ready on the replica launched after the failed one',
            20_000,
          );
          assert.deepEqual(doubles.launches, ['ts-slow-read-model-1', 'ts-slow-read-model-2']);
          assert.deepEqual([...doubles.running], ['ts-slow-read-model-2']);
          await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
          assert.equal(await t.finished(handle), 'deleted');
          await recordHistoryIfAsked(handle, 'deployment', 'launch-failed-slow-projection-retried');
        },
      );
    },
  );

  test(
    'a rollout whose new replica failed to start goes on after the backoff though the next projection is slow',
    { timeout: 60_000 },
    async () => {
      await withDeployment(deploymentInput('ts-slow-rollout', { min: 1, max: 1 }), {}, async ({ doubles, handle }) => {
        await until(
          () => doubles.latest,
          (s) => s?.status === 'Ready',
          'the first replica',
        );
        // A failed launch while rolling wakes the loop at once; the first projection after it ends
        // before the backoff does, so that round is deferred, and its projection (the second) outlasts it.
        doubles.failLaunches = 1;
        doubles.projectionDelayMs = (n) => (n === 2 ? 1500 : 0);
        await handle.executeUpdate(DEPLOYMENT_MESSAGES.update, { args: [{ image: 'example/replica:2' }] });
        await until(
          () => doubles.latest,
          (s) => s?.status === 'Ready' && s.revision === 2,
          'the deployment Ready on revision 2',
          20_000,
        );
        assert.deepEqual(doubles.launches, ['ts-slow-rollout-1', 'ts-slow-rollout-2', 'ts-slow-rollout-3']);
        assert.deepEqual([...doubles.running], ['ts-slow-rollout-3'], 'the old replica stopped, the new one runs');
        await handle.executeUpdate(DEPLOYMENT_MESSAGES.delete, { args: [] });
        assert.equal(await t.finished(handle), 'deleted');
        await recordHistoryIfAsked(handle, 'deployment', 'rollout-launch-failed-slow-projection-went-on');
      });
    },
  );
});
