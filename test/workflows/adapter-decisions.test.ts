/**
 * The adapterLoad workflow's decisions in Temporal's time-skipping test
 * server: a database that refuses the load's projections for longer than any
 * retry budget does not end the load, and operators find it by its state.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { AdapterControlActivities, AdapterHostActivities } from '../../activities/adapters';
import { CONTAINERS_TASK_QUEUE } from '../../shared/deployments';
import { SA_PHASE, SA_STATUS, statusSearchAttributes } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import type { adapterLoad as adapterLoadWorkflow } from '../../workflows/adapters';
import {
  createWorkflowTestEnv,
  recordHistoryIfAsked,
  runWorkers,
  until,
  type WorkflowTestEnv,
} from '../helpers/workflow-env';

describe('adapter load workflow decisions (time-skipping)', () => {
  let t: WorkflowTestEnv;
  afterEach(() => t?.teardown());

  test(
    'projections refused 55 times in a row (past the old budget of 50) delay the load; it still reaches READY',
    { timeout: 90_000 },
    async () => {
      t = await createWorkflowTestEnv();
      let refusals = 55;
      const states: string[] = [];
      const control: AdapterControlActivities = {
        async recordAdapterLoad(a) {
          if (refusals > 0) {
            refusals--;
            throw ApplicationFailure.retryable('connection to PostgreSQL refused', 'InjectedFault');
          }
          states.push(a.state);
        },
        async removeAdapter() {},
      };
      const host: AdapterHostActivities = {
        async loadAdapter() {
          return { ready: 2, failed: 0, total: 2 };
        },
        async unloadAdapter() {
          return 2;
        },
      };
      const workers = [await t.worker(CONTROL_TASK_QUEUE, control), await t.worker(CONTAINERS_TASK_QUEUE, host)];
      await runWorkers(workers, async () => {
        const handle = await t.env.client.workflow.start<typeof adapterLoadWorkflow>('adapterLoad', {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: 'adapter-load/ts-dep/ts-adapter',
          args: [
            {
              deploymentId: 'ts-dep',
              containerDeploymentId: 'ts-container',
              adapterModelId: 'ts-adapter',
              revisionId: 'rev-1',
              etag: 'etag-1',
              resyncSeconds: 3600,
            },
          ],
          typedSearchAttributes: statusSearchAttributes('ADAPTER_LOAD_STATE_PENDING'),
        });
        // The retries back off to 30 s: about 25 simulated minutes of refusals.
        for (let i = 0; i < 120 && !states.includes('ADAPTER_LOAD_STATE_READY'); i++) await t.advance(30_000, 5_000);
        await until(
          () => states,
          (s) => s.includes('ADAPTER_LOAD_STATE_READY'),
          'the load to be recorded READY',
        );
        assert.equal(refusals, 0);
        assert.equal((await handle.describe()).status.name, 'RUNNING');
        const d = await handle.describe();
        assert.equal(d.typedSearchAttributes.get(SA_STATUS), 'ADAPTER_LOAD_STATE_READY');
        assert.equal(d.typedSearchAttributes.get(SA_PHASE), 'active');
        await handle.signal('detach');
        assert.equal(await t.finished(handle), 'detached');
        await recordHistoryIfAsked(handle, 'adapterLoad', 'projections-refused-past-old-budget-ready-detached');
      });
    },
  );
});
