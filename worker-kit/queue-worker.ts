/**
 * The worker library for container authors: take jobs from a Gantry queue
 * and report on them over the worker protocol (POST /v1/queue/claim, update,
 * complete, fail). No dependencies beyond Node's fetch.
 *
 *   const worker = new QueueWorker({ baseUrl, apiKey, model: 'my-deployment' });
 *   await worker.run(async (job, ctx) => {
 *     await ctx.update({ stage: 'loading' }, 0.1);   // merged into the job's info
 *     return { answer: 42 };                         // the job's outputs
 *   });
 *
 * While a handler runs, the library keeps the claim alive with an update every
 * third of the claim timeout. A handler that throws fails the job (not
 * retried); a worker that dies or hangs loses the claim, and the job goes back
 * to the queue with its info kept.
 */
export interface QueueJob {
  request_id: string;
  model: string;
  payload: Record<string, unknown>;
  info: Record<string, unknown>;
  priority: number;
  retries: number;
}

export interface JobContext {
  /** Merges `info` into the job's info (and sets info.progress when given); keeps the claim alive. */
  update(info?: Record<string, unknown>, progress?: number): Promise<void>;
  signal: AbortSignal;
}

export type JobHandler = (job: QueueJob, ctx: JobContext) => Promise<Record<string, unknown>>;

export interface QueueWorkerOptions {
  baseUrl: string;
  apiKey: string;
  model: string;
  workerId?: string;
  claimTimeoutSeconds?: number;
  /** Long-poll for this long when the queue is empty (server caps it at 20). */
  waitSeconds?: number;
  /** Send keep-alive updates automatically (default true). */
  keepAlive?: boolean;
}

export class ClaimLostError extends Error {}

export class QueueWorker {
  private stopped = false;
  private readonly o: Required<QueueWorkerOptions>;

  constructor(options: QueueWorkerOptions) {
    this.o = {
      workerId: `worker-${process.pid}`,
      claimTimeoutSeconds: 60,
      waitSeconds: 10,
      keepAlive: true,
      ...options,
      baseUrl: options.baseUrl.replace(/\/+$/, ''),
    };
  }

  stop(): void {
    this.stopped = true;
  }

  private async post(path: string, body: object): Promise<Response> {
    return fetch(`${this.o.baseUrl}/v1/queue/${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${this.o.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  }

  /** Takes one job, or null when none came within the wait. */
  async claim(): Promise<(QueueJob & { claim_token: string }) | null> {
    const res = await this.post('claim', {
      model: this.o.model,
      worker_id: this.o.workerId,
      claim_timeout_seconds: this.o.claimTimeoutSeconds,
      wait_seconds: this.o.waitSeconds,
    });
    if (res.status === 204) return null;
    if (!res.ok) throw new Error(`claim failed: ${res.status} ${await res.text()}`);
    return (await res.json()) as QueueJob & { claim_token: string };
  }

  /** Runs one claimed job through the handler and reports the outcome. */
  async process(job: QueueJob & { claim_token: string }, handler: JobHandler): Promise<'done' | 'failed' | 'lost'> {
    const ref = { model: this.o.model, request_id: job.request_id, claim_token: job.claim_token };
    const abort = new AbortController();
    const send = async (path: string, body: object) => {
      const res = await this.post(path, { ...ref, ...body });
      if (res.status === 409) {
        abort.abort();
        throw new ClaimLostError(`claim of ${job.request_id} lost`);
      }
      if (!res.ok) throw new Error(`${path} failed: ${res.status} ${await res.text()}`);
    };
    const ctx: JobContext = {
      update: (info = {}, progress) => send('update', { info, ...(progress !== undefined ? { progress } : {}) }),
      signal: abort.signal,
    };
    const every = (this.o.claimTimeoutSeconds * 1000) / 3;
    const keepAlive = this.o.keepAlive ? setInterval(() => void ctx.update().catch(() => undefined), every) : undefined;
    try {
      const outputs = await handler(job, ctx);
      await send('complete', { outputs });
      return 'done';
    } catch (err) {
      if (err instanceof ClaimLostError || abort.signal.aborted) return 'lost';
      await send('fail', { error: err instanceof Error ? err.message : String(err) }).catch(() => undefined);
      return 'failed';
    } finally {
      if (keepAlive) clearInterval(keepAlive);
    }
  }

  /** Claims and processes jobs one at a time until stop() is called. */
  async run(handler: JobHandler): Promise<void> {
    while (!this.stopped) {
      const job = await this.claim();
      if (job) await this.process(job, handler);
    }
  }
}
