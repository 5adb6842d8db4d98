/**
 * Cluster orchestration overhead.
 *
 *   npx tsx bench/clusters.ts [clusters, default 50] [nodes per cluster, default 8]
 *
 * A Gantry round creates the clusters at once through the API, with the fleet
 * simulator's delays at zero, on a real Temporal dev server and PostgreSQL, waits
 * until every one is Ready (each cluster's time is created_at -> first_ready_at),
 * then deletes them. A reference round, on the same server: as many bare
 * workflows, started at once, each running as many no-op activities (one after
 * another) as a cluster ran before it was Ready (counted in a probe cluster's
 * history up to its first_ready_at). Rounds interleave (bench/lib/rounds.ts).
 * Judged: the median create-to-Ready over the reference's median, the
 * orchestration Gantry adds on top of Temporal's own cost per activity.
 */
import { NativeConnection, Worker } from '@temporalio/worker';
import { call, eventually, type TestPlatform } from '../test/helpers/platform';
import { runBench, withBenchPlatform } from './lib/platform';
import { compareInRounds, median } from './lib/rounds';
import { createTenant, type Tenant } from '../test/helpers/tenants';
import { temporalConnectionOptions } from '../platform/temporal';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);
/**
 * How often a round asks whether the cluster it waits for is Ready. The times judged are the
 * server's (created_at -> first_ready_at), so watching only adds load on the two cores it measures,
 * which the reference side does not pay: a round reads one cluster at a time (some 9 KB of JSON),
 * not the list of all 50 (some 470 KB for the API to make and the bench to parse each time).
 */
const POLL_MS = 1000;

/** Creates `count` clusters at once, waits until all are Ready, deletes them; create-to-Ready of each, in s. */
async function clusterRound(p: TestPlatform, tenant: Tenant, count: number, nodes: number, round: string) {
  const created = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      call(p.baseUrl, 'POST', '/v1/compute/clusters', {
        key: tenant.key,
        json: {
          cluster_name: `bench-${round}-${i}`,
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
  const ids = new Set<string>(created.map((r) => r.body.cluster_id));
  // One cluster at a time: by the time the first is Ready, most of the others are too.
  const ready: any[] = [];
  for (const id of ids) {
    const cluster = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/compute/clusters/${id}`, { key: tenant.key }),
      (r) => r.status === 200 && Boolean(r.body.first_ready_at),
      10 * 60_000,
      POLL_MS,
    );
    ready.push(cluster.body);
  }
  if (!ready.every((c: any) => c.gpu_worker_nodes.length === nodes)) throw new Error('a Ready cluster lacks nodes');
  for (const id of ids) await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${id}`, { key: tenant.key });
  await eventually(
    () => call(p.baseUrl, 'GET', '/v1/compute/clusters', { key: tenant.key }),
    (r) => !r.body.clusters.some((c: any) => ids.has(c.cluster_id)),
    10 * 60_000,
    POLL_MS,
  );
  return ready.map((c: any) => (Date.parse(c.first_ready_at) - Date.parse(c.created_at)) / 1000);
}

async function main() {
  const clusters = Number(process.argv[2] ?? 50);
  const nodes = Number(process.argv[3] ?? 8);
  const options = {
    gpuTypes: ['H100_SXM' as const],
    env: { GANTRY_FLEET_STEP_MS: '0', GANTRY_CLUSTER_HEALTH_CHECK_SECONDS: '3600' },
  };
  await withBenchPlatform(say, options, async (platform) => {
    const tenant = await createTenant(platform.db);
    // The probe: how many activities a cluster runs until it is Ready.
    const probe = await call(platform.baseUrl, 'POST', '/v1/compute/clusters', {
      key: tenant.key,
      json: {
        cluster_name: 'bench-probe',
        region: 'sim-us-east-1',
        gpu_type: 'H100_SXM',
        num_gpus: nodes * 8,
        billing_type: 'ON_DEMAND',
        nvidia_version_id: 'sim-us-east-1-cuda12.6-drv560-ubuntu-22.04',
      },
    });
    const probeId: string = probe.body.cluster_id;
    const readyAt = await eventually(
      () => call(platform.baseUrl, 'GET', `/v1/compute/clusters/${probeId}`, { key: tenant.key }),
      (r) => Boolean(r.body.first_ready_at),
      120_000,
    ).then((r) => Date.parse(r.body.first_ready_at));
    const history = await platform.temporal.workflow.getHandle(`cluster/${probeId}`).fetchHistory();
    const activities = history.events!.filter(
      (e) => e.activityTaskScheduledEventAttributes && Number(e.eventTime!.seconds) * 1000 <= readyAt,
    ).length;
    await call(platform.baseUrl, 'DELETE', `/v1/compute/clusters/${probeId}`, { key: tenant.key });
    say(`${clusters} clusters of ${nodes} nodes a round; ${activities} activities per cluster until Ready`);

    const connection = await NativeConnection.connect(temporalConnectionOptions(platform.config.temporal));
    const worker = await Worker.create({
      connection,
      taskQueue: 'bench-noop',
      workflowsPath: require.resolve('./lib/noop-workflow'),
      activities: { noop: async () => undefined },
    });
    const running = worker.run();
    let round = 0;
    try {
      await compareInRounds({
        bench: 'clusters',
        reference: async () => {
          const handles = await Promise.all(
            Array.from({ length: clusters }, (_, i) =>
              platform.temporal.workflow.start('noopActivities', {
                taskQueue: 'bench-noop',
                workflowId: `bench-noop-${round}-${i}-${Date.now()}`,
                args: [activities],
              }),
            ),
          );
          await Promise.all(handles.map((h) => h.result()));
          const times = await Promise.all(
            handles.map(async (h) => {
              const d = await h.describe();
              return (d.closeTime!.getTime() - d.startTime.getTime()) / 1000;
            }),
          );
          return { median_s: median(times), worst_s: Math.max(...times) };
        },
        gantry: async () => {
          const times = await clusterRound(platform, tenant, clusters, nodes, String(round++));
          return { median_s: median(times), worst_s: Math.max(...times) };
        },
        checks: [
          {
            name: 'create -> Ready, Gantry median / bare workflow median',
            value: (r, g) => g.median_s / r.median_s,
            atMost: 1.2,
          },
        ],
      });
    } finally {
      worker.shutdown();
      await running;
      await connection.close();
    }
  });
}

runBench(main);
