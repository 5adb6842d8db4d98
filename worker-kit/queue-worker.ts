/**
 * The worker library for container authors: take jobs from a Gantry queue
 * and report on them over the worker protocol (POST /v1/queue/claim, update,
 * complete, fail). No dependencies beyond Node's own http and https modules
 * (one kept-alive connection per worker: a job costs one request, and a
 * request over it costs a fraction of what fetch does).
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
 *
 * The API may be unreachable for a while (restarted, network trouble): claims
 * are retried with backoff, updates that cannot be delivered are dropped (the
 * next one carries on), and the outcome (complete or fail) is retried until the
 * API takes it or says the claim is gone. Reporting an outcome twice is safe:
 * the API answers a repeated report of the same claim with the job as it is.
 *
 * `run` reports each outcome and takes the next job in the same request
 * (`claim_next`): a busy worker makes one request per job.
 */
import { JsonClient, type Answer } from './json-client';

export interface QueueJob {
  request_id: string;
  model: string;
  payload: Record<string, unknown>;
  info: Record<string, unknown>;
  priority: number;
  retries: number;
}

/** A job this worker holds, with the token its reports must carry. */
export type ClaimedJob = QueueJob & { claim_token: string };

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

/** The API could not be reached, or answered with a server error: worth trying again. */
class TransportError extends Error {}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class QueueWorker {
  private stopped = false;
  private readonly o: Required<QueueWorkerOptions>;
  private readonly http: JsonClient;

  constructor(options: QueueWorkerOptions) {
    this.o = {
      workerId: `worker-${process.pid}`,
      claimTimeoutSeconds: 60,
      waitSeconds: 10,
      keepAlive: true,
      ...options,
      baseUrl: options.baseUrl.replace(/\/+$/, ''),
    };
    this.http = new JsonClient(this.o.baseUrl);
  }

  stop(): void {
    this.stopped = true;
  }

  private async post(path: string, body: object): Promise<Answer> {
    for (;;) {
      let res: Answer;
      try {
        res = await this.http.post(`/v1/queue/${path}`, this.o.apiKey, body);
      } catch (err) {
        throw new TransportError(`${path}: ${(err as Error).message}`);
      }
      if (res.status >= 500) throw new TransportError(`${path} failed: ${res.status} ${res.text}`);
      // Over the key's rate limit: wait as long as the API says, then send the same call again.
      if (res.status === 429 && !this.stopped) {
        await sleep(Math.min(60, Math.max(1, Number(res.retryAfter) || 1)) * 1000);
        continue;
      }
      return res;
    }
  }

  /** What a claim asks for: this worker's id, claim timeout and wait. */
  private claimOptions() {
    return {
      worker_id: this.o.workerId,
      claim_timeout_seconds: this.o.claimTimeoutSeconds,
      wait_seconds: this.o.waitSeconds,
    };
  }

  /** Takes one job, or null when none came within the wait. */
  async claim(): Promise<ClaimedJob | null> {
    const res = await this.post('claim', { model: this.o.model, ...this.claimOptions() });
    if (res.status === 204) return null;
    if (res.status !== 200) throw new Error(`claim failed: ${res.status} ${res.text}`);
    return JSON.parse(res.text) as ClaimedJob;
  }

  /** Runs one claimed job through the handler and reports the outcome. */
  async process(job: ClaimedJob, handler: JobHandler): Promise<'done' | 'failed' | 'lost'> {
    return (await this.handle(job, handler, false)).outcome;
  }

  /**
   * Runs the job through the handler and reports the outcome; with `claimNext` (and the worker not
   * stopped) the report also takes the queue's next job, which it returns.
   */
  private async handle(
    job: ClaimedJob,
    handler: JobHandler,
    claimNext: boolean,
  ): Promise<{ outcome: 'done' | 'failed' | 'lost'; next: ClaimedJob | null }> {
    const ref = { model: this.o.model, request_id: job.request_id, claim_token: job.claim_token };
    const abort = new AbortController();
    const send = async (path: string, body: object): Promise<{ next_claim?: ClaimedJob | null }> => {
      const res = await this.post(path, { ...ref, ...body });
      if (res.status === 409) {
        abort.abort();
        throw new ClaimLostError(`claim of ${job.request_id} lost`);
      }
      if (res.status !== 200) throw new Error(`${path} failed: ${res.status} ${res.text}`);
      return JSON.parse(res.text) as { next_claim?: ClaimedJob | null };
    };
    const ctx: JobContext = {
      // An update the API cannot take now is dropped: the next one (or the outcome) carries on.
      update: (info = {}, progress) =>
        send('update', { info, ...(progress !== undefined ? { progress } : {}) }).then(
          () => undefined,
          (err) => {
            if (!(err instanceof TransportError)) throw err;
          },
        ),
      signal: abort.signal,
    };
    // The outcome must arrive: retried until the API takes it or says the claim is gone.
    const report = async (path: 'complete' | 'fail', body: object) => {
      for (let delay = 200; ; delay = Math.min(delay * 2, 5000)) {
        try {
          return await send(path, body);
        } catch (err) {
          if (!(err instanceof TransportError) || this.stopped) throw err;
          await sleep(delay);
        }
      }
    };
    const every = (this.o.claimTimeoutSeconds * 1000) / 3;
    const keepAlive = this.o.keepAlive ? setInterval(() => void ctx.update().catch(() => undefined), every) : undefined;
    let outcome: { path: 'complete'; outputs: Record<string, unknown> } | { path: 'fail'; error: string };
    try {
      outcome = { path: 'complete', outputs: await handler(job, ctx) };
    } catch (err) {
      if (err instanceof ClaimLostError || abort.signal.aborted) return { outcome: 'lost', next: null };
      outcome = { path: 'fail', error: err instanceof Error ? err.message : String(err) };
    } finally {
      if (keepAlive) clearInterval(keepAlive);
    }
    const next = claimNext && !this.stopped ? { claim_next: this.claimOptions() } : {};
    try {
      const answer =
        outcome.path === 'complete'
          ? await report('complete', { outputs: outcome.outputs, ...next })
          : await report('fail', { error: outcome.error, ...next });
      return { outcome: outcome.path === 'complete' ? 'done' : 'failed', next: answer.next_claim ?? null };
    } catch (err) {
      if (err instanceof ClaimLostError) return { outcome: 'lost', next: null };
      throw err;
    }
  }

  /**
   * Claims and processes jobs one at a time until stop() is called, each report taking the next
   * job; waits out an unreachable API. A job already taken when stop() comes is processed first
   * (once stopped, reports take no next one), so none is left to lapse.
   */
  async run(handler: JobHandler): Promise<void> {
    let next: ClaimedJob | null = null;
    for (let delay = 200; !this.stopped || next;) {
      let job: ClaimedJob | null = next;
      if (!job) {
        try {
          job = await this.claim();
          delay = 200;
        } catch (err) {
          if (!(err instanceof TransportError)) throw err;
          await sleep(delay);
          delay = Math.min(delay * 2, 5000);
          continue;
        }
      }
      next = job ? (await this.handle(job, handler, true)).next : null;
    }
    this.http.close();
  }
}
