/**
 * Inference gateway overhead, and waking from zero.
 *
 *   npx tsx bench/gateway.ts [completions per measurement, default 1000]
 *
 * Each GET /health measurement sends eight times as many requests: at 4,000 to 16,000 a second,
 * 2,000 of them took 0.1 to 0.5 s, and one scheduling hiccup moved a round's ratio by half (one
 * 5-round run on 2026-11-27: gateway / leanest Node proxy 0.47 to 1.38 between rounds). 400
 * completions (about a second) moved a round's completions ratio by ±10%.
 *
 * An endpoint with one replica of the reference model server. The gateway
 * runs as its own process (gateway/server.ts), as `./dev up` runs it. The
 * same workload, 8 concurrent clients, in interleaved rounds (bench/lib/rounds.ts):
 *   - a trivial GET (/health) through the gateway's deployment proxy, through the leanest Node
 *     proxy (bench/lib/bare-node-proxy.ts), through a Node TCP pass-through (Node without its
 *     HTTP layer), through nginx where it is installed (one worker, keep-alive upstream;
 *     bench/lib/nginx.ts) and to the replica directly: the gateway's own cost, with no model
 *     work behind. Judged, as decided, against the leanest Node proxy: throughput and p50;
 *     nginx and the direct call are shown, not judged;
 *   - completions (max_tokens 1, greedy) through the gateway by endpoint string, through the
 *     leanest Node proxy and to the replica directly. Judged: gateway / leanest Node proxy
 *     throughput; gateway / direct is shown.
 * Then, once, a deployment scaled to zero is called: the time until its first
 * answer (a replica started, the model loaded and the request served).
 *
 * The clients call through the worker library's kept-alive node:http client
 * (worker-kit/json-client.ts) on every side: with fetch, the bench's own clients took 0.3 ms of
 * CPU a request on the two cores the proxies share (node:http 0.05 ms), so the proxies were
 * judged on what the bench's clients left them.
 *
 * Beside the throughput, each Node proxy's own CPU per request (its process's /proc counters, shown,
 * not judged): a neighbour's load moves a round's throughput ratio by half on a shared machine,
 * the CPU each proxy spends on the same request much less, and it is what the gap is made of.
 */
import { call, eventually } from '../test/helpers/platform';
import { startProcess } from '../test/helpers/processes';
import { createTenant } from '../test/helpers/tenants';
import { freePort } from '../platform/ports';
import { benchNodeArgs, runBench, BENCH_SERVER_ENV, withBenchPlatform } from './lib/platform';
import { nginxAvailable, startNginxProxy } from './lib/nginx';
import { compareInRounds, percentile } from './lib/rounds';
import { runningReplicaOrigins } from '../db/deployments';
import { JsonClient, type Answer } from '../worker-kit/json-client';
import { cpuPer } from './lib/process-cpu';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);
const CLIENTS = 8;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** CLIENTS kept-alive connections to `origin`, for one side's load. */
const clientsOf = (origin: string) => new JsonClient(origin, { connections: CLIENTS });

/** `load`, with the CPU microseconds process `pid` (the proxy in the middle) used per request. */
async function loadOn(pid: number, n: number, send: () => Promise<Answer>) {
  const { result, cpuMicroseconds } = await cpuPer(pid, n, () => load(n, send));
  return { ...result, cpu_us: cpuMicroseconds };
}

async function load(n: number, send: () => Promise<Answer>) {
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < n) {
        next++;
        const start = performance.now();
        const res = await send();
        if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${res.text.slice(0, 200)}`);
        latencies.push(performance.now() - start);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return {
    requests_per_s: Math.round(n / seconds),
    p50_ms: +percentile(latencies, 50).toFixed(2),
    p99_ms: +percentile(latencies, 99).toFixed(2),
  };
}

async function main() {
  const n = Number(process.argv[2] ?? 1000);
  const healthN = 8 * n;
  const env = { GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1', GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '1' };
  await withBenchPlatform(say, { env }, async (platform) => {
    const tenant = await createTenant(platform.db);
    const gatewayPort = await freePort();
    const gateway = startProcess(
      'gateway/server.ts',
      { GANTRY_GATEWAY_PORT: String(gatewayPort), ...BENCH_SERVER_ENV },
      benchNodeArgs(),
    );
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    try {
      while (
        !(await fetch(`${gatewayUrl}/healthz`).then(
          (r) => r.ok,
          () => false,
        ))
      )
        await sleep(100);
      const v2 = (method: string, path: string, json?: unknown) =>
        call(platform.baseUrl, method, `/v2/projects/${tenant.projectId}${path}`, { key: tenant.key, json });
      await v2('POST', '/endpoints', { name: 'bench' });
      const dep = await v2('POST', '/endpoints/bench/deployments', {
        name: 'one',
        modelId: 'gantry/reference-byte-tiny',
        autoscaling: { minReplicas: 1, maxReplicas: 1 },
      });
      const ready = await eventually(
        () => v2('GET', '/endpoints/bench/deployments/one').then((r) => r.body),
        (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
        120_000,
      );
      const { rows } = await platform.db.query(
        'SELECT container_deployment_id FROM endpoint_deployments WHERE id = $1',
        [dep.body.id],
      );
      const container = rows[0].container_deployment_id as string;
      const [origin] = await runningReplicaOrigins(platform.db, container);
      const port = Number(new URL(origin).port); // the bench's platform runs its replicas on 127.0.0.1
      const named = await platform.db.query('SELECT name FROM deployments WHERE id = $1', [container]);
      const containerName = named.rows[0].name as string;
      say(`replica ready on port ${port} (${ready.status.message})`);

      const auth = { authorization: `Bearer ${tenant.key}`, 'content-type': 'application/json' };
      const body = (model: string) =>
        Buffer.from(JSON.stringify({ model, prompt: 'hello', max_tokens: 1, temperature: 0 }));
      const toGateway = clientsOf(gatewayUrl);
      const toReplica = clientsOf(origin);
      const viaGateway = () =>
        toGateway.request('POST', '/v1/completions', { headers: auth, body: body(`${tenant.projectSlug}/bench`) });
      const direct = () => toReplica.request('POST', '/v1/completions', { headers: auth, body: body('model') });
      const healthViaGateway = () =>
        toGateway.request('GET', `/v1/deployments/${containerName}/health`, { headers: auth });
      const healthDirect = () => toReplica.request('GET', '/health');

      // nginx is shown for information where it is installed (`./dev bench` installs it).
      const nginx = nginxAvailable() ? await startNginxProxy(port) : undefined;
      if (!nginx) say('nginx is not installed: the gateway / nginx figure is left out (it is not judged)');
      const toNginx = nginx && clientsOf(nginx.url);
      const healthViaNginx = () => toNginx!.request('GET', '/health');
      const bareProxyPort = await freePort();
      const bareProxy = startProcess('bench/lib/bare-node-proxy.ts', {
        BARE_PROXY_PORT: String(bareProxyPort),
        BARE_PROXY_UPSTREAM: String(port),
      });
      const toBareProxy = clientsOf(`http://127.0.0.1:${bareProxyPort}`);
      const healthViaBareProxy = () => toBareProxy.request('GET', '/health', { headers: auth });
      const pipePort = await freePort();
      const pipe = startProcess('bench/lib/bare-node-tcp-pipe.ts', {
        BARE_PIPE_PORT: String(pipePort),
        BARE_PIPE_UPSTREAM: String(port),
      });
      const toPipe = clientsOf(`http://127.0.0.1:${pipePort}`);
      const healthViaPipe = () => toPipe.request('GET', '/health');
      for (const send of [healthViaBareProxy, healthViaPipe]) {
        await eventually(
          () =>
            send().then(
              (r) => r.status === 200,
              () => false,
            ),
          Boolean,
          10_000,
        );
      }
      try {
        await compareInRounds({
          bench: 'gateway',
          reference: async () => {
            const bare = await load(healthN, healthDirect);
            const proxied = nginx ? await load(healthN, healthViaNginx) : undefined;
            const bare_node = await loadOn(bareProxy.child.pid!, healthN, healthViaBareProxy);
            const node_pipe = await load(healthN, healthViaPipe);
            const completions = await load(n, direct);
            const completionsBareNode = await loadOn(bareProxy.child.pid!, n, () =>
              toBareProxy.request('POST', '/v1/completions', { headers: auth, body: body('model') }),
            );
            return {
              health_direct_rps: bare.requests_per_s,
              health_direct_p50_ms: bare.p50_ms,
              ...(proxied ? { health_nginx_rps: proxied.requests_per_s, health_nginx_p50_ms: proxied.p50_ms } : {}),
              health_bare_node_proxy_rps: bare_node.requests_per_s,
              health_bare_node_proxy_p50_ms: bare_node.p50_ms,
              health_bare_node_proxy_cpu_us: bare_node.cpu_us,
              // Not judged: what Node costs without its HTTP layer (bench/lib/bare-node-tcp-pipe.ts).
              health_node_tcp_pipe_rps: node_pipe.requests_per_s,
              completions_direct_rps: completions.requests_per_s,
              completions_bare_node_proxy_rps: completionsBareNode.requests_per_s,
              completions_bare_node_proxy_cpu_us: completionsBareNode.cpu_us,
            };
          },
          gantry: async () => {
            const health = await loadOn(gateway.child.pid!, healthN, healthViaGateway);
            const completions = await loadOn(gateway.child.pid!, n, viaGateway);
            return {
              health_gateway_rps: health.requests_per_s,
              health_gateway_p50_ms: health.p50_ms,
              health_gateway_cpu_us: health.cpu_us,
              completions_gateway_rps: completions.requests_per_s,
              completions_gateway_cpu_us: completions.cpu_us,
            };
          },
          // Judged against the leanest Node proxy (the decided reference); nginx and the direct
          // call are shown for information.
          checks: [
            {
              name: 'proxied GET /health, gateway / the leanest Node proxy',
              value: (r, g) => g.health_gateway_rps / r.health_bare_node_proxy_rps,
              atLeast: 0.9,
            },
            {
              name: 'p50 of a proxied GET /health, gateway - the leanest Node proxy',
              value: (r, g) => g.health_gateway_p50_ms - r.health_bare_node_proxy_p50_ms,
              atMost: 1,
              unit: 'ms',
            },
            {
              name: 'completions, gateway / the leanest Node proxy',
              value: (r, g) => g.completions_gateway_rps / r.completions_bare_node_proxy_rps,
              atLeast: 0.95,
            },
            ...(nginx
              ? [
                  {
                    name: 'proxied GET /health, gateway / nginx',
                    value: (r: Record<string, number>, g: Record<string, number>) =>
                      g.health_gateway_rps / r.health_nginx_rps,
                    informational: true,
                  },
                ]
              : []),
            {
              name: 'p50 the gateway adds to a direct GET /health',
              value: (r, g) => g.health_gateway_p50_ms - r.health_direct_p50_ms,
              informational: true,
              unit: 'ms',
            },
            {
              name: 'completions, gateway / direct',
              value: (r, g) => g.completions_gateway_rps / r.completions_direct_rps,
              informational: true,
            },
            {
              name: 'CPU per proxied GET /health, gateway / the leanest Node proxy',
              value: (r, g) => g.health_gateway_cpu_us / r.health_bare_node_proxy_cpu_us,
              informational: true,
            },
            {
              name: 'CPU per completion, gateway / the leanest Node proxy',
              value: (r, g) => g.completions_gateway_cpu_us / r.completions_bare_node_proxy_cpu_us,
              informational: true,
            },
          ],
        });
      } finally {
        await nginx?.stop();
        for (const helper of [bareProxy, pipe]) {
          helper.child.kill('SIGTERM');
          await helper.exited;
        }
      }

      // Waking from zero.
      await v2('POST', '/endpoints/bench/deployments', {
        name: 'cold',
        modelId: 'gantry/reference-byte-tiny',
        autoscaling: { minReplicas: 0, maxReplicas: 1 },
      });
      await eventually(
        () => v2('GET', '/endpoints/bench/deployments/cold').then((r) => r.body),
        (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 0,
        60_000,
      );
      await v2('PATCH', '/endpoints/bench', {
        trafficSplit: [{ deploymentId: (await v2('GET', '/endpoints/bench/deployments/cold')).body.id, weight: 100 }],
      });
      const t0 = performance.now();
      const woke = await viaGateway();
      const wakeMs = Math.round(performance.now() - t0);
      say(`wake from zero: HTTP ${woke.status} after ${wakeMs} ms`);
    } finally {
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  });
}

runBench(main);
