/**
 * Cluster orchestration overhead.
 *
 *   npx tsx bench/clusters.ts [clusters, default 50] [nodes per cluster, default 8]
 *
 * Creates the clusters at once through the API, with the fleet simulator's
 * delays at zero, on a real Temporal dev server and PostgreSQL, and waits
 * until every one is Ready. Each cluster's time is created_at -> first_ready_at.
 * The reference, measured in the same run on the same server: as many bare
 * workflows, started at once, each running the same number of no-op
 * activities (one after another) as a cluster ran to reach Ready. Printed:
 * median and worst create-to-Ready, the reference median, and the ratio
 * (cluster median / reference median): the orchestration Gantry adds on top
 * of Temporal's own cost per activity.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import { call } from '../test/helpers/platform';
import { runBench, withBenchPlatform } from './lib/platform';
import { createTenant } from '../test/helpers/tenants';
import { temporalConnectionOptions } from '../common/temporal';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  const clusters = Number(process.argv[2] ?? 50);
  const nodes = Number(process.argv[3] ?? 8);
  const options = {
    gpuTypes: ['H100_SXM' as const],
    env: { GANTRY_FLEET_STEP_MS: '0', GANTRY_CLUSTER_HEALTH_CHECK_SECONDS: '3600' },
  };
  await withBenchPlatform(say, options, async (platform) => {
    const tenant = await createTenant(platform.db);
    say(`creating ${clusters} clusters of ${nodes} nodes at once`);
    const created = await Promise.all(
      Array.from({ length: clusters }, (_, i) =>
        call(platform.baseUrl, 'POST', '/v1/compute/clusters', {
          key: tenant.key,
          json: {
            cluster_name: `bench-${i}`,
            region: 'sim-us-east-1',
            gpu_type: 'H100_SXM',
            num_gpus: nodes * 8,
            billing_type: 'ON_DEMAND',
            nvidia_version_id: 'sim-us-east-1-cuda12.6-drv560-ubuntu-22.04',
          },
        }),
      ),
    );
    if (created.some((r) => r.status !== 200))
      throw new Error(`a create failed: ${JSON.stringify(created.find((r) => r.status !== 200)!.body)}`);
    const ids: string[] = created.map((r) => r.body.cluster_id);
    let ready: any[] = [];
    const deadline = Date.now() + 10 * 60_000;
    while (ready.length < ids.length) {
      if (Date.now() > deadline) throw new Error(`only ${ready.length}/${ids.length} clusters reached Ready`);
      await new Promise((r) => setTimeout(r, 250));
      const list = await call(platform.baseUrl, 'GET', '/v1/compute/clusters', { key: tenant.key });
      ready = list.body.clusters.filter((c: any) => c.first_ready_at);
    }
    const times = ready.map((c) => (Date.parse(c.first_ready_at) - Date.parse(c.created_at)) / 1000);
    const allNodes = ready.every((c) => c.gpu_worker_nodes.length === nodes);
    const history = await platform.temporal.workflow.getHandle(`cluster/${ids[0]}`).fetchHistory();
    const activities = history.events!.filter((e) => e.activityTaskScheduledEventAttributes).length;
    say(
      `all ${ready.length} Ready (${allNodes ? 'each with' : 'NOT all with'} ${nodes} nodes); ${activities} activities per cluster`,
    );

    // Reference: bare workflows, same count, same server, started at once.
    const connection = await NativeConnection.connect(temporalConnectionOptions(platform.config.temporal));
    const worker = await Worker.create({
      connection,
      taskQueue: 'bench-noop',
      workflowsPath: require.resolve('./lib/noop-workflow'),
      activities: { noop: async () => undefined },
    });
    const running = worker.run();
    const handles = await Promise.all(
      ids.map((_, i) =>
        platform.temporal.workflow.start('noopActivities', {
          taskQueue: 'bench-noop',
          workflowId: `bench-noop-${i}-${Date.now()}`,
          args: [activities],
        }),
      ),
    );
    await Promise.all(handles.map((h) => h.result()));
    const refTimes = await Promise.all(
      handles.map(async (h) => {
        const d = await h.describe();
        return (d.closeTime!.getTime() - d.startTime.getTime()) / 1000;
      }),
    );
    worker.shutdown();
    await running;
    await connection.close();

    const m = median(times);
    const ref = median(refTimes);
    const result = {
      clusters,
      nodes_per_cluster: nodes,
      activities_per_cluster: activities,
      create_to_ready_median_s: +m.toFixed(3),
      create_to_ready_worst_s: +Math.max(...times).toFixed(3),
      reference_median_s: +ref.toFixed(3),
      reference_worst_s: +Math.max(...refTimes).toFixed(3),
      ratio_median_to_reference: +(m / ref).toFixed(3),
    };
    process.stdout.write(JSON.stringify(result, null, 2) + '\n');
  });
}

runBench(main);
