/**
 * A node whose health flaps for days, in Temporal's time-skipping test server with the activity
 * doubles of test/helpers/cluster-doubles.ts: every failure is rebooted, and the state each run
 * carries to the next stays bounded. A file of its own: the longest of the workflow tier, it runs
 * beside the other cluster files instead of after them.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MAX_NODE_PHASE_TRANSITIONS, type ClusterState } from '../../shared/clusters';
import { clusterWorkflowKit } from '../helpers/cluster-workflow-kit';
import { workflowTestEnvForFile } from '../helpers/workflow-env';

describe('a cluster with a flapping node (time-skipping)', { timeout: 600_000 }, () => {
  const t = workflowTestEnvForFile();
  const { withCluster, ready, deleteAndCheck, historyLengths } = clusterWorkflowKit(t);

  test(
    'a node whose health flaps for days: every failure is rebooted, and the carried state stays bounded',
    { timeout: 600_000 },
    async (ctx) => {
      // GANTRY_FLAP_DAYS=30 measures the simulated month of the closing note. The suite runs four
      // days: the state grows to the third (27,365, 47,207, then 47,297 bytes) and not on the fourth
      // (47,297 again), so the last two days show it stopped growing, not that it grows slowly.
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
});
