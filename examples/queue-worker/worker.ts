/**
 * Example worker container for a Gantry queue (used by the tests, and the
 * template for container authors). It reads GANTRY_BASE_URL, GANTRY_API_KEY,
 * QUEUE_MODEL (default: the deployment it runs in, GANTRY_DEPLOYMENT) and
 * WORKER_ID (default: its replica id), and handles jobs whose payload says
 * what to do:
 *
 *   {"op": "echo", "value": ...}             -> outputs {"value": ...}
 *   {"op": "sleep", "ms": 500, "steps": 5}   -> reports progress each step, and
 *                                               info.attempt_<retries>_by = WORKER_ID
 *   {"op": "fail", "message": "..."}         -> fails the job (not retried)
 *   {"op": "hang"}                           -> never answers (the claim times out)
 *
 * In a podman replica GANTRY_BASE_URL is set by the runtime (the API through
 * the replica's bridge). It logs one JSON line when it starts, {"worker": id, "pid": n}, and one per
 * job it takes, {"claimed": id, "priority": p, "retries": r}. When PORT is set
 * (it runs as a deployment replica) it answers GET /health there.
 */
import { createServer } from 'node:http';
import { QueueWorker } from '../../worker-kit/queue-worker';

const env = (k: string) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};

const workerId = process.env.WORKER_ID ?? process.env.GANTRY_REPLICA_ID ?? `example-${process.pid}`;
const worker = new QueueWorker({
  baseUrl: env('GANTRY_BASE_URL'),
  apiKey: env('GANTRY_API_KEY'),
  model: process.env.QUEUE_MODEL ?? env('GANTRY_DEPLOYMENT'),
  workerId,
  claimTimeoutSeconds: Number(process.env.CLAIM_TIMEOUT_SECONDS ?? 60),
  waitSeconds: 2,
  // The "hang" op must really go silent, so keep-alives are left to the handler.
  keepAlive: false,
});

process.stdout.write(JSON.stringify({ worker: workerId, pid: process.pid }) + '\n');
const health = process.env.PORT
  ? // HOST: the image sets 0.0.0.0 (its port is published from the container's own address).
    createServer((_req, res) => res.end('ok')).listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1')
  : null;
process.on('SIGTERM', () => {
  health?.close();
  worker.stop();
});

void worker.run(async (job, ctx) => {
  process.stdout.write(
    JSON.stringify({ claimed: job.request_id, priority: job.priority, retries: job.retries }) + '\n',
  );
  const p = job.payload as { op?: string; value?: unknown; ms?: number; steps?: number; message?: string };
  switch (p.op) {
    case 'echo':
      return { value: p.value ?? null };
    case 'sleep': {
      const steps = p.steps ?? 1;
      await ctx.update({ [`attempt_${job.retries}_by`]: workerId });
      for (let i = 1; i <= steps; i++) {
        await new Promise((r) => setTimeout(r, (p.ms ?? 100) / steps));
        await ctx.update({ [`step_${i}_by`]: workerId }, i / steps);
      }
      return { slept_ms: p.ms ?? 100 };
    }
    case 'fail':
      throw new Error(p.message ?? 'the payload asked to fail');
    case 'hang':
      await ctx.update({ hung_by: workerId });
      return new Promise(() => undefined);
    default:
      throw new Error(`unknown op ${JSON.stringify(p.op)}`);
  }
});
