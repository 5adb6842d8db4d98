/**
 * The queue's use cases (spec: Queue; the SDK's beta.jig.queue): submitting, reading, canceling
 * and clearing jobs, the counts, and the worker protocol (claim with its long-poll, update,
 * complete, fail). Order comes from PostgreSQL (db/queue.ts); the claims' timers and the
 * retention period from the queue's dispatcher workflow (workflows/queue.ts queueDispatcher),
 * which these start or wake. Built once per API (queueUseCases): the claim loop remembers which
 * deployment each queue name was, for its wakeup versions.
 */
import type { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { queueDispatcherWorkflowId } from '../../shared/deployments';
import { newId } from '../../platform/ids';
import {
  cancelJob,
  claimJob,
  clearJobs,
  ensureDispatcherBy,
  finishJob,
  finishJobAndClaimNext,
  getJob,
  queueMetrics,
  releaseClaim,
  submitJob,
  touchJob,
  type Claim,
  type ClaimAttempt,
  type ClaimRef as StoredClaimRef,
  type ClaimRequest,
  type Outcome,
  type JobRow,
} from '../../db/queue';
import { findDeploymentByName } from '../../db/deployments';
import { withTransaction, type Queryable } from '../../db/pool';
import { notifyJobPending } from '../../db/queue-wakeups';
import { wakeQueueDispatcher, queueDispatcher } from '../../workflows/queue';
import type { ApiDeps } from '../deps';
import { conflict, notFound, payloadTooLarge, serviceUnavailable } from '../errors';
import { signalWithStartResourceWorkflow } from '../workflows';
import type { ClaimRef, ClaimNext, ClaimSchema, ReportedJobSchema, SubmitBody, UpdateJobBody } from '../schemas/queue';
import { toJobStatus } from '../presenters/queue';

/** The client's connection: its 'close' ends a claim's wait. */
type Connection = Pick<EventEmitter, 'once' | 'off'>;

/** The queue's use cases, sharing one memory of queue ids (see the module comment). */
export function queueUseCases(deps: ApiDeps) {
  const { db, config, queueWakeups: wakeups } = deps;

  const noSuchDeployment = (model: string) =>
    notFound(
      `No deployment named '${model}' in this project; a queue's model is a deployment name.`,
      'model_not_found',
    );
  async function requireDeployment(projectId: string, model: string) {
    const d = await findDeploymentByName(db, projectId, model);
    if (!d) throw noSuchDeployment(model);
    return d;
  }
  /**
   * The deployment id of each (project, queue name) claims were made on, for their wakeup versions.
   * A stale entry costs one extra look (the claim returns the current id); the map is bounded.
   */
  const queueIds = new Map<string, string>();
  const rememberQueueId = (key: string, id: string) => {
    if (queueIds.size >= 10_000) queueIds.clear();
    queueIds.set(key, id);
  };
  async function requireJob(projectId: string, model: string, id: string) {
    const job = await getJob(db, projectId, model, id);
    if (!job) throw notFound(`No job '${id}' for model '${model}'.`, 'job_not_found');
    return job;
  }
  /** Jobs canceled while pending are kept for the retention period: their queue's dispatcher deletes them then. */
  const retention = (deployment: QueueRef) =>
    withTransaction(db, (tx) =>
      ensureDispatcher(deps, tx, deployment, new Date(Date.now() + config.queueRetentionSeconds * 1000)),
    );

  /** Queues a job on the project's deployment `model`; its id. */
  async function submit(principal: Principal, body: z.infer<typeof SubmitBody>): Promise<string> {
    const size = Buffer.byteLength(JSON.stringify(body.payload));
    if (size > config.queueMaxPayloadBytes) {
      throw payloadTooLarge(
        `payload is ${size} bytes of JSON; the limit is ${config.queueMaxPayloadBytes}.`,
        'payload',
      );
    }
    const id = newId('job');
    const queued = await submitJob(db, {
      id,
      projectId: principal.projectId,
      model: body.model,
      priority: body.priority,
      payload: body.payload,
      info: body.info ?? {},
    });
    if (!queued) {
      await requireDeployment(principal.projectId, body.model); // names what is missing
      throw serviceUnavailable('The deployment changed while the job was being queued; submit it again.');
    }
    if (wakeups) wakeups.jobPending(db, queued);
    else await notifyJobPending(db, queued);
    return id;
  }

  /** Cancels a pending job: its status after the attempt, and whether it was canceled. */
  async function cancel(principal: Principal, model: string, requestId: string) {
    const job = await requireJob(principal.projectId, model, requestId);
    const status = await cancelJob(db, job.id);
    if (status !== 'canceled' || job.status !== 'pending') return { job, status, canceled: false };
    await retention({ id: job.deployment_id, projectId: principal.projectId, model: job.model });
    return { job, status, canceled: true };
  }

  /** Cancels every pending job of the project's queue `model`; how many. */
  async function clear(principal: Principal, model: string): Promise<number> {
    const deployment = await requireDeployment(principal.projectId, model);
    const ids = await clearJobs(db, deployment.id);
    if (ids.length) await retention({ id: deployment.id, projectId: principal.projectId, model });
    return ids.length;
  }

  /** Pending and running counts of the project's queue `model`. */
  async function metrics(principal: Principal, model: string) {
    const deployment = await requireDeployment(principal.projectId, model);
    return queueMetrics(db, deployment.id);
  }

  /** A worker's progress and info on its claim (keeps the claim alive): the job. */
  async function update(principal: Principal, body: z.infer<typeof UpdateJobBody>) {
    const info = { ...body.info, ...(body.progress !== undefined ? { progress: body.progress } : {}) };
    const job = await touchJob(db, storedClaim(principal.projectId, body), info);
    if (!job) throw await lost(principal.projectId, body);
    return job;
  }

  /**
   * Claims the next job of the project's queue `model`, waiting up to `wait_seconds` for one to
   * arrive; null when none did (or the client went away).
   */
  async function takeNextJob(
    principal: Principal,
    model: string,
    opts: z.infer<typeof ClaimNext>,
    res: Connection,
    /** Makes the first attempt instead of claimJob (a report's finish and claim in one statement). */
    firstAttempt?: (claim: ClaimRequest) => Promise<ClaimAttempt>,
  ): Promise<z.infer<typeof ClaimSchema> | null> {
    const queueKey = `${principal.projectId}\n${model}`;
    const deadline = Date.now() + opts.wait_seconds * 1000;
    // The client going away ends the wait (and the claim is not made for nobody). The listener goes
    // with the answer: left on, it aborted after every answer, making a DOMException (and its stack)
    // per claim.
    const gone = new AbortController();
    const leave = () => gone.abort();
    res.once('close', leave);
    try {
      for (;;) {
        // The wakeup version is read before the claim looks, so a job submitted in between is not
        // missed; it is the queue's (the deployment's), known from an earlier claim of this name.
        const known = queueIds.get(queueKey);
        const seen = known && wakeups ? wakeups.version(known) : 0;
        const request: ClaimRequest = {
          projectId: principal.projectId,
          model,
          worker: opts.worker_id ?? `api-key:${principal.apiKeyId}`,
          timeoutMs: opts.claim_timeout_seconds * 1000,
        };
        const attempt = await (firstAttempt ?? ((r: ClaimRequest) => claimJob(db, r)))(request);
        firstAttempt = undefined;
        if (!attempt.deploymentId) {
          queueIds.delete(queueKey);
          throw noSuchDeployment(model);
        }
        if (attempt.claim) {
          const queue = { id: attempt.deploymentId, projectId: principal.projectId, model };
          if (attempt.wakeDispatcher) await wakeDispatcherFor(queue, attempt.claim);
          const { job, token } = attempt.claim;
          return {
            request_id: job.id,
            model: job.model,
            payload: job.payload,
            info: job.info,
            priority: Number(job.priority),
            retries: job.retries,
            claim_token: token,
            claim_timeout_seconds: opts.claim_timeout_seconds,
          };
        }
        if (attempt.deploymentId !== known) {
          // The version read was not this queue's: look once more with the right one before waiting.
          rememberQueueId(queueKey, attempt.deploymentId);
          continue;
        }
        const left = deadline - Date.now();
        if (left <= 0 || gone.signal.aborted) return null;
        // Waiting holds no database connection: a notification (or the deadline) wakes it.
        if (wakeups) await wakeups.wait(known, seen, left, gone.signal);
        else await sleep(Math.min(left, 250), undefined, { signal: gone.signal }).catch(() => undefined);
      }
    } finally {
      res.off('close', leave);
    }
  }

  /**
   * A worker's report (complete or fail) on its claim: the job as it is after the outcome, and the
   * next claim when the worker asked for one. The outcome and the first look for a next job are one
   * statement (finishJobAndClaimNext); the separate path serves a claim that is lost, or the same
   * outcome reported again (its first answer was lost on the way).
   */
  async function report(
    principal: Principal,
    body: z.infer<typeof ClaimRef> & { claim_next?: z.infer<typeof ClaimNext> },
    outcome: Outcome,
    res: Connection,
  ): Promise<z.infer<typeof ReportedJobSchema>> {
    const ref = storedClaim(principal.projectId, body);
    const finishSeparately = async () => {
      const job = await finishJob(db, ref, outcome);
      if (!job) throw await lost(principal.projectId, body);
      return job;
    };
    if (!body.claim_next) return toJobStatus(await finishSeparately());
    let job: JobRow | undefined;
    const next = await takeNextJob(principal, body.model, body.claim_next, res, async (claim) => {
      const both = await finishJobAndClaimNext(db, ref, outcome, claim);
      job = both?.job ?? (await finishSeparately());
      return both?.next ?? claimJob(db, claim);
    });
    return { ...toJobStatus(job!), next_claim: next };
  }

  /**
   * A claim its queue's dispatcher must be woken to watch: wake it (or start it), and when that
   * fails, give the job back before the worker sees it, so no claim stays that no timer watches.
   */
  async function wakeDispatcherFor(queue: QueueRef, claim: Claim): Promise<void> {
    try {
      await wakeDispatcher(deps, queue);
    } catch (err) {
      await releaseClaim(db, queue.id, claim);
      throw err;
    }
  }

  const storedClaim = (projectId: string, b: z.infer<typeof ClaimRef>): StoredClaimRef => ({
    projectId,
    model: b.model,
    id: b.request_id,
    token: b.claim_token,
  });
  /** A report on a claim changed nothing: 404 when the project has no such job, else the claim is lost (409). */
  const lost = async (projectId: string, b: z.infer<typeof ClaimRef>) => {
    await requireJob(projectId, b.model, b.request_id);
    return conflict(
      `Job '${b.request_id}' is no longer claimed by this worker (its claim timed out, or it finished).`,
      'claim_lost',
    );
  };

  return { submit, requireJob, cancel, clear, metrics, takeNextJob, update, report };
}

interface QueueRef {
  /** The deployment's id. */
  id: string;
  projectId: string;
  model: string;
}

/**
 * Inside `tx` (a cancel's), before it commits: makes sure the queue's dispatcher looks at the queue
 * by `by`, waking it (or starting it) when it would look later or is not running. A failure here
 * rolls the transaction back.
 */
async function ensureDispatcher(deps: ApiDeps, tx: Queryable, queue: QueueRef, by: Date): Promise<void> {
  if (await ensureDispatcherBy(tx, queue.id, by)) await wakeDispatcher(deps, queue);
}

/** Wakes the queue's dispatcher, starting it when it is not running. */
async function wakeDispatcher(deps: ApiDeps, queue: QueueRef): Promise<void> {
  await signalWithStartResourceWorkflow(
    deps.temporal,
    {
      workflow: queueDispatcher,
      workflowId: queueDispatcherWorkflowId(queue.id),
      args: [{ deploymentId: queue.id, retentionSeconds: deps.config.queueRetentionSeconds }],
      projectId: queue.projectId,
      resourceType: 'queue',
      resourceId: queue.id,
      status: 'running',
      summary: `Claim timers and retention of queue ${queue.model}`,
      details:
        'Looks at the queue at each claim deadline and retention end: a lapsed claim goes back to the queue ' +
        '(or fails after 3 retries), finished jobs past the retention period are deleted.',
      names: { resource: queue.model },
    },
    wakeQueueDispatcher,
  );
}
