/**
 * Example worker container for a Gantry queue (used by the tests, and the
 * template for container authors). It reads GANTRY_BASE_URL, GANTRY_API_KEY,
 * QUEUE_MODEL and WORKER_ID, and handles jobs whose payload says what to do:
 *
 *   {"op": "echo", "value": ...}             -> outputs {"value": ...}
 *   {"op": "sleep", "ms": 500, "steps": 5}   -> reports progress each step
 *   {"op": "fail", "message": "..."}         -> fails the job (not retried)
 *   {"op": "hang"}                           -> never answers (the claim times out)
 *
 * Each job it takes is logged as one JSON line on stdout: {"claimed": id, "priority": p}.
 */
import { QueueWorker } from '../../worker-kit/queue-worker';

const env = (k: string) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set`);
  return v;
};

const worker = new QueueWorker({
  baseUrl: env('GANTRY_BASE_URL'),
  apiKey: env('GANTRY_API_KEY'),
  model: env('QUEUE_MODEL'),
  workerId: process.env.WORKER_ID ?? `example-${process.pid}`,
  claimTimeoutSeconds: Number(process.env.CLAIM_TIMEOUT_SECONDS ?? 60),
  waitSeconds: 2,
  // The "hang" op must really go silent, so keep-alives are left to the handler.
  keepAlive: false,
});

process.on('SIGTERM', () => worker.stop());

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
      for (let i = 1; i <= steps; i++) {
        await new Promise((r) => setTimeout(r, (p.ms ?? 100) / steps));
        await ctx.update({ [`step_${i}_by`]: process.env.WORKER_ID ?? 'example' }, i / steps);
      }
      return { slept_ms: p.ms ?? 100 };
    }
    case 'fail':
      throw new Error(p.message ?? 'the payload asked to fail');
    case 'hang':
      await ctx.update({ hung_by: process.env.WORKER_ID ?? 'example' });
      return new Promise(() => undefined);
    default:
      throw new Error(`unknown op ${JSON.stringify(p.op)}`);
  }
});
