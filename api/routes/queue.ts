/**
 * The asynchronous job queue (spec: Queue; the SDK's beta.jig.queue): submit,
 * status, cancel, clear, metrics; and the worker protocol that containers
 * use to take jobs: claim (long-poll), update (info, progress; keeps the
 * claim alive), complete, fail. Order comes from PostgreSQL (db/queue.ts);
 * the claims' timers and the retention period from the queue's dispatcher
 * workflow (workflows/queue.ts queueDispatcher).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { z } from 'zod';
import { queueDispatcherWorkflowId } from '../../shared/deployments';
import { newId } from '../../platform/ids';
import {
  cancelJob,
  claimNextJob,
  clearJobs,
  ensureDispatcherBy,
  finishJob,
  getJob,
  queueMetrics,
  submitJob,
  touchJob,
  type JobRow,
} from '../../db/queue';
import { findDeploymentByName } from '../../db/deployments';
import { withTransaction, type Queryable } from '../../db/pool';
import { wakeQueueDispatcher, queueDispatcher } from '../../workflows/queue';
import type { ApiDeps } from '../deps';
import { conflict, notFound, payloadTooLarge, serviceUnavailable } from '../errors';
import type { ApiRouter } from '../route';
import { signalWithStartResourceWorkflow } from '../workflows';
import {
  ModelRef,
  SubmitBody,
  SubmittedJobSchema,
  JobRef,
  ClaimBody,
  type ClaimRef,
  UpdateJobBody,
  CompleteBody,
  FailBody,
  JobCanceledSchema,
  QueueClearedSchema,
  QueueMetricsSchema,
  JobStatusSchema,
  ClaimSchema,
} from '../schemas/queue';

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : undefined);

export function toJobStatus(j: JobRow) {
  return {
    request_id: j.id,
    model: j.model,
    status: j.status,
    priority: Number(j.priority),
    retries: j.retries,
    info: j.info,
    inputs: j.payload,
    ...(j.outputs ? { outputs: j.outputs } : {}),
    ...(j.error ? { error: j.error } : {}),
    warnings: j.warnings,
    created_at: iso(j.created_at)!,
    ...(j.claimed_at ? { claimed_at: iso(j.claimed_at) } : {}),
    ...(j.done_at ? { done_at: iso(j.done_at) } : {}),
    history: j.history.map((h) => ({ ...h, at: new Date(h.at).toISOString() })),
  };
}

export function addQueueRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, config, queueWakeups: wakeups } = deps;

  async function requireDeployment(projectId: string, model: string) {
    const d = await findDeploymentByName(db, projectId, model);
    if (!d)
      throw notFound(
        `No deployment named '${model}' in this project; a queue's model is a deployment name.`,
        'model_not_found',
      );
    return d;
  }
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

  router.add({
    method: 'post',
    path: '/queue/submit',
    operationId: 'submitQueueJob',
    summary: "Submit a job to a deployment's queue (strict priority order, FIFO within a priority)",
    tags: ['queue'],
    body: SubmitBody,
    errors: [404, 413],
    response: {
      status: 200,
      description: 'The job id (both spellings: the spec says request_id, the SDK reads requestId)',
      schema: SubmittedJobSchema,
    },
    handler: async ({ body, principal }) => {
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
      return { request_id: id, requestId: id };
    },
  });

  router.add({
    method: 'get',
    path: '/queue/status',
    operationId: 'getQueueJobStatus',
    summary: "A job's status, outputs or error, info, priority, retries and timestamps",
    tags: ['queue'],
    query: JobRef,
    errors: [404],
    response: { status: 200, description: 'The job', schema: JobStatusSchema },
    handler: async ({ query, principal }) =>
      toJobStatus(await requireJob(principal.projectId, query.model, query.request_id)),
  });

  router.add({
    method: 'post',
    path: '/queue/cancel',
    operationId: 'cancelQueueJob',
    summary: 'Cancel a pending job (409, status unchanged, when it is running or finished)',
    tags: ['queue'],
    body: JobRef,
    errors: [404, 409],
    response: { status: 200, description: 'Status after the attempt', schema: JobCanceledSchema },
    handler: async ({ body, principal, res }) => {
      const job = await requireJob(principal.projectId, body.model, body.request_id);
      const status = await cancelJob(db, job.id);
      if (status !== 'canceled' || job.status !== 'pending') {
        const err = conflict(`Job '${job.id}' is ${status}; only pending jobs can be canceled.`, 'job_not_pending');
        res.status(409).json({ status, ...err.toBody() });
        return undefined;
      }
      await retention({ id: job.deployment_id, projectId: principal.projectId, model: job.model });
      return { status };
    },
  });

  router.add({
    method: 'post',
    path: '/queue/clear',
    operationId: 'clearQueue',
    summary: 'Cancel every pending job of a model; running jobs are untouched',
    tags: ['queue'],
    body: ModelRef,
    errors: [404],
    response: {
      status: 200,
      description: 'How many were canceled',
      schema: QueueClearedSchema,
    },
    handler: async ({ body, principal }) => {
      const deployment = await requireDeployment(principal.projectId, body.model);
      const ids = await clearJobs(db, deployment.id);
      if (ids.length) await retention({ id: deployment.id, projectId: principal.projectId, model: body.model });
      return { canceled_count: ids.length };
    },
  });

  router.add({
    method: 'get',
    path: '/queue/metrics',
    operationId: 'getQueueMetrics',
    summary: "Pending and running counts of a model's queue",
    tags: ['queue'],
    query: ModelRef,
    errors: [404],
    response: {
      status: 200,
      description: 'Counts',
      schema: QueueMetricsSchema,
    },
    handler: async ({ query, principal }) => {
      const deployment = await requireDeployment(principal.projectId, query.model);
      const m = await queueMetrics(db, deployment.id);
      return { messages_waiting: m.pending, messages_running: m.running, total_jobs: m.pending + m.running };
    },
  });

  // ---- the worker protocol ----

  router.add({
    method: 'post',
    path: '/queue/claim',
    operationId: 'claimQueueJob',
    summary: 'Worker protocol: take the next job (highest priority, oldest first); 204 when there is none',
    tags: ['queue worker protocol'],
    body: ClaimBody,
    errors: [404, 503],
    response: { status: 200, description: 'The claimed job', schema: ClaimSchema },
    emptyResponses: { 204: 'No job was pending, or none arrived within wait_seconds' },
    handler: async ({ body, principal, req, res }) => {
      const deployment = await requireDeployment(principal.projectId, body.model);
      const timeoutMs = body.claim_timeout_seconds * 1000;
      const deadline = Date.now() + body.wait_seconds * 1000;
      // The client going away ends the wait (and the claim is not made for nobody).
      const gone = new AbortController();
      res.once('close', () => gone.abort());
      for (;;) {
        const seen = wakeups?.version(deployment.id) ?? 0;
        const claim = await claimNextJob(
          db,
          { deploymentId: deployment.id, worker: body.worker_id ?? `api-key:${principal.apiKeyId}`, timeoutMs },
          (job, _token, tx) =>
            ensureDispatcher(
              deps,
              tx,
              { id: deployment.id, projectId: principal.projectId, model: job.model },
              job.claim_expires_at!,
            ),
        );
        if (claim) {
          return {
            request_id: claim.job.id,
            model: claim.job.model,
            payload: claim.job.payload,
            info: claim.job.info,
            priority: Number(claim.job.priority),
            retries: claim.job.retries,
            claim_token: claim.token,
            claim_timeout_seconds: body.claim_timeout_seconds,
          };
        }
        const left = deadline - Date.now();
        if (left <= 0 || gone.signal.aborted) break;
        // Waiting holds no database connection: a notification (or the deadline) wakes it.
        if (wakeups) await wakeups.wait(deployment.id, seen, left, gone.signal);
        else await sleep(Math.min(left, 250), undefined, { signal: gone.signal }).catch(() => undefined);
      }
      res.status(204).end();
      return undefined;
    },
  });

  const claimed = async (projectId: string, b: z.infer<typeof ClaimRef>) => {
    await requireJob(projectId, b.model, b.request_id);
  };
  const lost = (id: string) =>
    conflict(`Job '${id}' is no longer claimed by this worker (its claim timed out, or it finished).`, 'claim_lost');

  router.add({
    method: 'post',
    path: '/queue/update',
    operationId: 'updateQueueJob',
    summary: 'Worker protocol: report progress and info; keeps the claim alive for another claim timeout',
    tags: ['queue worker protocol'],
    body: UpdateJobBody,
    errors: [404, 409],
    response: { status: 200, description: 'The job', schema: JobStatusSchema },
    handler: async ({ body, principal }) => {
      await claimed(principal.projectId, body);
      const info = { ...body.info, ...(body.progress !== undefined ? { progress: body.progress } : {}) };
      const job = await touchJob(db, body.request_id, body.claim_token, info);
      if (!job) throw lost(body.request_id);
      return toJobStatus(job);
    },
  });

  router.add({
    method: 'post',
    path: '/queue/complete',
    operationId: 'completeQueueJob',
    summary: 'Worker protocol: the job is done, with its outputs',
    tags: ['queue worker protocol'],
    body: CompleteBody,
    errors: [404, 409],
    response: { status: 200, description: 'The job', schema: JobStatusSchema },
    handler: async ({ body, principal }) => {
      await claimed(principal.projectId, body);
      const job = await finishJob(db, body.request_id, body.claim_token, {
        status: 'done',
        outputs: body.outputs,
        info: body.info,
      });
      if (!job) throw lost(body.request_id);
      return toJobStatus(job);
    },
  });

  router.add({
    method: 'post',
    path: '/queue/fail',
    operationId: 'failQueueJob',
    summary: 'Worker protocol: the job failed; it is not retried',
    tags: ['queue worker protocol'],
    body: FailBody,
    errors: [404, 409],
    response: { status: 200, description: 'The job', schema: JobStatusSchema },
    handler: async ({ body, principal }) => {
      await claimed(principal.projectId, body);
      const job = await finishJob(db, body.request_id, body.claim_token, {
        status: 'failed',
        error: body.error,
        info: body.info,
      });
      if (!job) throw lost(body.request_id);
      return toJobStatus(job);
    },
  });
}

interface QueueRef {
  /** The deployment's id. */
  id: string;
  projectId: string;
  model: string;
}

/**
 * Inside `tx` (a claim's or a cancel's), before it commits: makes sure the queue's dispatcher looks
 * at the queue by `by`, waking it (or starting it) when it would look later or is not running. A
 * failure here rolls the transaction back: no claim is made that no timer watches.
 */
async function ensureDispatcher(deps: ApiDeps, tx: Queryable, queue: QueueRef, by: Date): Promise<void> {
  if (!(await ensureDispatcherBy(tx, queue.id, by))) return;
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
