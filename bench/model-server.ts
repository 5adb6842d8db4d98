/**
 * The PyTorch model server (trainers/torch/gantry_torch_trainer/serve.py) on SmolLM2-135M-Instruct.
 *
 *   npx tsx bench/model-server.ts [requests per measurement, default 4]
 *
 * An endpoint with one replica of the torch server (process runtime, GANTRY_TORCH_TRAINER_PYTHON);
 * the gateway as its own process. In interleaved rounds (bench/lib/rounds.ts):
 *   - tokens per second of a greedy completion (64 tokens) asked of the replica directly, against
 *     transformers' own `generate` in a bare loop (bench/lib/bare_generate.py) on the same
 *     weights, prompt and threads (torch's default for both), one request at a time. Judged:
 *     server / bare loop;
 *   - time to the first token of a streamed completion through the gateway and to the replica
 *     directly, in pairs of calls one right after the other on the same side. Judged: the median of
 *     the pairs' differences, the time the gateway adds.
 *
 * Two machines on one (bench/lib/cpu-pinning.ts): the model server and the bare loop run on the last
 * core, the gateway and this process (the platform and the bench's clients) on the others, for
 * both sides of both checks. In production the model server runs on a GPU host and the gateway on
 * the control plane; sharing two cores, torch's two threads kept both busy while the gateway waited
 * for one, so the added time measured the scheduler (10.6 ms p50, -6.3 to 21.1 between rounds, on
 * 2026-11-28). Torch then uses the one thread its core gives it, on both sides alike.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { call, eventually } from '../test/helpers/platform';
import { startProcess } from '../test/helpers/processes';
import { createTenant } from '../test/helpers/tenants';
import { freePort } from '../platform/ports';
import { benchNodeArgs, runBench, BENCH_SERVER_ENV, withBenchPlatform } from './lib/platform';
import { compareInRounds, percentile } from './lib/rounds';
import { runningReplicaOrigins } from '../db/deployments';
import { allowedCpus, listenerPid, modelAndHostCpus, pinProcess } from './lib/cpu-pinning';
import { runQueueWaitMs } from './lib/process-cpu';

const say = (s: string) => process.stderr.write(`[bench] ${s}\n`);
const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const PROMPT = 'The history of the city of Paris begins';
const TOKENS = 64;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The bare loop's process: one JSON line in, one out; on `cpus` when given (torch takes one thread per core it may use). */
function bareLoop(python: string, base: string, cpus?: string) {
  const argv = [python, path.join(__dirname, 'lib/bare_generate.py'), base];
  const child = spawn(cpus ? 'taskset' : argv[0], cpus ? ['-c', cpus, ...argv] : argv.slice(1), {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value as string);
  return {
    ready: next(),
    async generate(): Promise<{ tokens: number; seconds: number; threads: number }> {
      child.stdin.write(`${JSON.stringify({ prompt: PROMPT, max_tokens: TOKENS })}\n`);
      return next();
    },
    stop: () => child.kill('SIGTERM'),
  };
}

/** Milliseconds to the first streamed token of a greedy completion. */
async function firstToken(url: string, headers: Record<string, string>, model: string): Promise<number> {
  const start = performance.now();
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ model, prompt: PROMPT, max_tokens: 2, temperature: 0, stream: true }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const reader = res.body!.getReader();
  let text = '';
  let at = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
    if (!at && /"text": "[^"]/.test(text)) at = performance.now() - start;
  }
  return at;
}

async function main() {
  const n = Number(process.argv[2] ?? 4);
  const python = process.env.GANTRY_TORCH_TRAINER_PYTHON;
  if (!python)
    throw new Error(
      'bench/model-server.ts needs GANTRY_TORCH_TRAINER_PYTHON and the installed model: run it as `./dev bench model-server`, which installs and exports both',
    );
  await withBenchPlatform(say, {}, async (platform) => {
    const tenant = await createTenant(platform.db);
    const gatewayPort = await freePort();
    const gateway = startProcess(
      'gateway/server.ts',
      { GANTRY_GATEWAY_PORT: String(gatewayPort), ...BENCH_SERVER_ENV },
      benchNodeArgs(),
    );
    const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
    const cpus = modelAndHostCpus();
    if (cpus) pinProcess(gateway.child.pid!, cpus.host);
    else
      say('one core, or no taskset or ss: the model server and the gateway share the cores (see the module comment)');
    const bare = bareLoop(python, path.join(platform.config.modelDir, MODEL), cpus?.model);
    try {
      while (
        !(await fetch(`${gatewayUrl}/healthz`).then(
          (r) => r.ok,
          () => false,
        ))
      )
        await sleep(100);
      const v2 = (method: string, p: string, json?: unknown) =>
        call(platform.baseUrl, method, `/v2/projects/${tenant.projectId}${p}`, { key: tenant.key, json });
      await v2('POST', '/endpoints', { name: 'smol' });
      // The replica is started by this process's container worker and inherits its CPUs, so torch
      // in it sizes its thread pool to the model's core; this process moves to the host's after.
      if (cpus) pinProcess(process.pid, cpus.model);
      const dep = await v2('POST', '/endpoints/smol/deployments', {
        name: 'one',
        modelId: MODEL,
        autoscaling: { minReplicas: 1, maxReplicas: 1 },
      });
      await eventually(
        () => v2('GET', '/endpoints/smol/deployments/one').then((r) => r.body),
        (d) => d.status.readyReplicas === 1,
        240_000,
      );
      if (cpus) pinProcess(process.pid, cpus.host);
      const { rows } = await platform.db.query(
        'SELECT container_deployment_id FROM endpoint_deployments WHERE id = $1',
        [dep.body.id],
      );
      const [origin] = await runningReplicaOrigins(platform.db, rows[0].container_deployment_id as string);
      if (cpus) {
        const replicaPid = listenerPid(Number(new URL(origin).port));
        pinProcess(replicaPid, cpus.model); // all its threads, whatever it started with
        say(
          `replica on CPUs ${allowedCpus(replicaPid)}; gateway on ${allowedCpus(gateway.child.pid!)}, ` +
            `this process on ${allowedCpus(process.pid)}`,
        );
      }
      say(`replica ready at ${origin}; bare loop ${JSON.stringify(await bare.ready)}`);
      const auth = { authorization: `Bearer ${tenant.key}` };

      const serverTokensPerSecond = async () => {
        let tokens = 0;
        let seconds = 0;
        for (let i = 0; i < n; i++) {
          const start = performance.now();
          const res = await fetch(`${origin}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ prompt: PROMPT, max_tokens: TOKENS, temperature: 0 }),
          });
          const body = (await res.json()) as { usage: { completion_tokens: number } };
          seconds += (performance.now() - start) / 1000;
          tokens += body.usage.completion_tokens;
        }
        return tokens / seconds;
      };
      const bareTokensPerSecond = async () => {
        let tokens = 0;
        let seconds = 0;
        for (let i = 0; i < n; i++) {
          const r = await bare.generate();
          tokens += r.tokens;
          seconds += r.seconds;
        }
        return tokens / seconds;
      };
      // The first-token times come in pairs, one call through the gateway and one straight to the
      // replica right after each other (which goes first alternates), and the judged value is the
      // median of the pairs' differences: the model's own time to a first token varied by tens of
      // milliseconds from call to call and drifted between series, and as the difference of two
      // series' medians the added time swung from -17 to +38 ms between rounds (2026-11-29). A pair
      // takes two short completions, inside the gateway's route cache's 500 ms
      // (gateway/inference.ts ROUTE_TTL_MS), as steady traffic is; a caller after a pause pays
      // its lookups, which this does not measure.
      const firstTokens = async () => {
        const viaGateway = () => firstToken(`${gatewayUrl}/v1/completions`, auth, `${tenant.projectSlug}/smol`);
        const direct = () => firstToken(`${origin}/v1/completions`, {}, 'model');
        const through: number[] = [];
        const straight: number[] = [];
        // Shown beside it: how long the gateway's event loop waited for a CPU per call (ready to run
        // while another process had its core), which the added time includes.
        const waited = runQueueWaitMs(gateway.child.pid!);
        for (let i = 0; i < 4 * n; i++) {
          if (i % 2 === 0) {
            through.push(await viaGateway());
            straight.push(await direct());
          } else {
            straight.push(await direct());
            through.push(await viaGateway());
          }
        }
        const waitedMs = (runQueueWaitMs(gateway.child.pid!) - waited) / (4 * n);
        return {
          gateway_first_token_p50_ms: +percentile(through, 50).toFixed(2),
          direct_first_token_p50_ms: +percentile(straight, 50).toFixed(2),
          gateway_adds_p50_ms: +percentile(
            through.map((t, i) => t - straight[i]),
            50,
          ).toFixed(2),
          gateway_cpu_wait_ms_per_call: +waitedMs.toFixed(2),
        };
      };

      await compareInRounds({
        bench: 'model-server',
        reference: async () => ({ bare_loop_tokens_per_s: +(await bareTokensPerSecond()).toFixed(1) }),
        gantry: async () => ({
          server_tokens_per_s: +(await serverTokensPerSecond()).toFixed(1),
          ...(await firstTokens()),
        }),
        checks: [
          {
            name: 'tokens per second, model server / transformers in a bare loop',
            value: (r, g) => g.server_tokens_per_s / r.bare_loop_tokens_per_s,
            atLeast: 0.9,
          },
          {
            name: 'p50 time to first token the gateway adds',
            value: (_r, g) => g.gateway_adds_p50_ms,
            atMost: 5,
            unit: 'ms',
          },
        ],
      });
    } finally {
      bare.stop();
      gateway.child.kill('SIGTERM');
      await gateway.exited;
    }
  });
}

runBench(main);
