/**
 * The adapterLoad workflow's decisions in Temporal's time-skipping test
 * server: a database that refuses the load's projections for longer than any
 * retry budget does not end the load, and operators find it by its state.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApplicationFailure } from '@temporalio/common';
import type { AdapterControlActivities, AdapterHostActivities } from '../../activities/adapters';
import { SA_PHASE, SA_STATUS, statusSearchAttributes } from '../../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import { ADAPTER_LOAD_MESSAGES } from '../../shared/adapter-loads';
import type { AdapterLoadInput, adapterLoad as adapterLoadWorkflow } from '../../workflows/adapters';
import {
  workflowTestEnvForFile,
  historyLengths,
  recordHistoryIfAsked,
  runWorkers,
  until,
} from '../helpers/workflow-env';

/** Two container hosts' own queues (containerHostQueue's form). */
const HOST_A = 'containers@ts-host-a';
const HOST_B = 'containers@ts-host-b';

const t = workflowTestEnvForFile();

/** Starts an adapter load of revision rev-1 as the API would, with `input`'s own settings. */
function startLoad(workflowId: string, input: Pick<AdapterLoadInput, 'resyncSeconds'> & Partial<AdapterLoadInput>) {
  return t.env.client.workflow.start<typeof adapterLoadWorkflow>('adapterLoad', {
    taskQueue: CONTROL_TASK_QUEUE,
    workflowId,
    args: [
      {
        deploymentId: 'ts-dep',
        containerDeploymentId: 'ts-container',
        adapterModelId: 'ts-adapter',
        revisionId: 'rev-1',
        etag: 'etag-1',
        ...input,
      },
    ],
    typedSearchAttributes: statusSearchAttributes('ADAPTER_LOAD_STATE_PENDING'),
  });
}

describe('adapter load workflow decisions (time-skipping)', () => {
  test(
    'projections refused 55 times in a row (past the old budget of 50) delay the load; it still reaches READY',
    { timeout: 90_000 },
    async () => {
      let refusals = 55;
      const states: string[] = [];
      const control: AdapterControlActivities = {
        async replicaHosts() {
          return [{ hostQueue: HOST_A, replicas: 2 }];
        },
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
      const workers = [await t.worker(CONTROL_TASK_QUEUE, control), await t.worker(HOST_A, host)];
      await runWorkers(workers, async () => {
        const handle = await startLoad('adapter-load/ts-dep/ts-adapter', { resyncSeconds: 3600 });
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
        await handle.signal(ADAPTER_LOAD_MESSAGES.detach);
        assert.equal(await t.finished(handle), 'detached');
        // An operator's search for active work no longer lists it (issue 44).
        const ended = await handle.describe();
        assert.equal(ended.typedSearchAttributes.get(SA_STATUS), 'ADAPTER_LOAD_STATE_DETACHED');
        assert.equal(ended.typedSearchAttributes.get(SA_PHASE), 'done');
        await recordHistoryIfAsked(handle, 'adapterLoad', 'projections-refused-past-old-budget-ready-detached');
        await recordHistoryIfAsked(handle, 'adapterLoad', 'ready-detached-says-done');
      });
    },
  );
  test(
    'the load goes to each host that holds replicas, on its own queue; a host whose load fails counts its replicas failed until it succeeds',
    { timeout: 90_000 },
    async () => {
      const loads: Array<{ queue: string; thisHostOnly?: boolean }> = [];
      const unloads: string[] = [];
      const records: Array<{ state: string; ready?: number; failed?: number; total?: number; reason?: string }> = [];
      const control: AdapterControlActivities = {
        async replicaHosts() {
          return [
            { hostQueue: HOST_A, replicas: 2 },
            { hostQueue: HOST_B, replicas: 1 },
          ];
        },
        async recordAdapterLoad(a) {
          records.push(a);
        },
        async removeAdapter() {},
      };
      // Host B's disk is full for its first five attempts (the activity's whole retry budget).
      let hostBRefusals = 5;
      /** A host's activities, holding `replicas` of the deployment. */
      const hostWith = (queue: string, replicas: number): AdapterHostActivities => ({
        async loadAdapter(a) {
          loads.push({ queue, thisHostOnly: a.thisHostOnly });
          if (queue === HOST_B && hostBRefusals-- > 0) throw new Error('no space left on device');
          return { ready: replicas, failed: 0, total: replicas };
        },
        async unloadAdapter() {
          unloads.push(queue);
          return replicas;
        },
      });
      const workers = [
        await t.worker(CONTROL_TASK_QUEUE, control),
        await t.worker(HOST_A, hostWith(HOST_A, 2)),
        await t.worker(HOST_B, hostWith(HOST_B, 1)),
      ];
      const last = () => records.filter((r) => r.state !== 'ADAPTER_LOAD_STATE_LOADING').at(-1);
      await runWorkers(workers, async () => {
        const handle = await startLoad('adapter-load/ts-dep/ts-adapter-hosts', { resyncSeconds: 600 });
        t.watch(handle);
        // The retries back off from 1 s to 30 s: the first round ends within a simulated minute or two.
        for (let i = 0; i < 20 && !last(); i++) await t.advance(10_000, 5_000);
        const failed = await until(last, (r) => r !== undefined, 'the first round to be recorded');
        assert.equal(failed.state, 'ADAPTER_LOAD_STATE_FAILED');
        assert.deepEqual([failed.ready, failed.failed, failed.total], [2, 1, 3]);
        assert.match(failed.reason ?? '', /container host containers@ts-host-b did not take the load/);
        assert.match(failed.reason ?? '', /no space left on device/);
        // The next resync loads there too, and the load is READY on all three replicas.
        for (let i = 0; i < 40 && last()?.state !== 'ADAPTER_LOAD_STATE_READY'; i++) await t.advance(30_000, 5_000);
        const ready = await until(last, (r) => r?.state === 'ADAPTER_LOAD_STATE_READY', 'the load to be READY');
        assert.deepEqual([ready.ready, ready.failed, ready.total], [3, 0, 3]);
        assert.ok(
          loads.every((l) => l.thisHostOnly),
          'each host is asked for its own replicas only',
        );
        assert.deepEqual([...new Set(loads.map((l) => l.queue))].sort(), [HOST_A, HOST_B]);
        await handle.signal(ADAPTER_LOAD_MESSAGES.detach);
        assert.equal(await t.finished(handle), 'detached');
        assert.deepEqual(unloads.sort(), [HOST_A, HOST_B]);
        await recordHistoryIfAsked(handle, 'adapterLoad', 'per-host-one-host-failed-then-ready-detached');
      });
    },
  );
  test('with many hosts a run continues as new by its history length, well before its round budget', async (ctx) => {
    const hosts = Array.from({ length: 6 }, (_, i) => `containers@ts-host-${i}`);
    const control: AdapterControlActivities = {
      async replicaHosts() {
        return hosts.map((hostQueue) => ({ hostQueue, replicas: 1 }));
      },
      async recordAdapterLoad() {},
      async removeAdapter() {},
    };
    const host: AdapterHostActivities = {
      async loadAdapter() {
        return { ready: 1, failed: 0, total: 1 };
      },
      async unloadAdapter() {
        return 1;
      },
    };
    const workers = [
      await t.worker(CONTROL_TASK_QUEUE, control),
      ...(await Promise.all(hosts.map((q) => t.worker(q, host)))),
    ];
    await runWorkers(workers, async () => {
      const handle = await startLoad('adapter-load/ts-dep/ts-adapter-many-hosts', {
        resyncSeconds: 60,
        maxRounds: 500,
        maxHistoryEvents: 200,
      });
      t.watch(handle);
      // A round here is some 30 events (six hosts' loads, the host list, the projection, the timer).
      await t.advance(30 * 60_000, 60_000);
      const runs = await historyLengths(t.env, handle);
      ctx.diagnostic(`runs of ${runs.join(', ')} events`);
      assert.ok(runs.length >= 3, `continued as new (${runs.length} runs in 30 rounds)`);
      assert.ok(Math.max(...runs) < 200 + 60, `largest run ${Math.max(...runs)} events`);
      assert.equal((await handle.describe()).status.name, 'RUNNING');
      await handle.signal(ADAPTER_LOAD_MESSAGES.detach);
      assert.equal(await t.finished(handle), 'detached');
    });
  });
});
