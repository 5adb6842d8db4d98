/**
 * The asynchronous job queue (spec: Queue; the SDK's beta.jig.queue): submit,
 * status, cancel, clear, metrics; and the worker protocol that containers
 * use to take jobs: claim (long-poll), update (info, progress; keeps the
 * claim alive), complete, fail. Order comes from PostgreSQL (db/queue.ts);
 * the claims' timers and the retention period from the queue's dispatcher
 * workflow (workflows/queue.ts queueDispatcher). The work is in
 * api/use-cases/queue.ts; these declare, parse and present.
 */
import type { ApiDeps } from '../deps';
import { conflict } from '../errors';
import type { ApiRouter } from '../route';
import {
  ModelRef,
  SubmitBody,
  SubmittedJobSchema,
  JobRef,
  ClaimBody,
  UpdateJobBody,
  CompleteBody,
  FailBody,
  JobCanceledSchema,
  QueueClearedSchema,
  QueueMetricsSchema,
  JobStatusSchema,
  ClaimSchema,
  ReportedJobSchema,
} from '../schemas/queue';
import { queueUseCases } from '../use-cases/queue';
import { toJobStatus } from '../presenters/queue';

export function addQueueRoutes(router: ApiRouter, deps: ApiDeps) {
  const queue = queueUseCases(deps);

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
      const id = await queue.submit(principal, body);
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
      toJobStatus(await queue.requireJob(principal.projectId, query.model, query.request_id)),
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
      const { job, status, canceled } = await queue.cancel(principal, body.model, body.request_id);
      if (!canceled) {
        const err = conflict(`Job '${job.id}' is ${status}; only pending jobs can be canceled.`, 'job_not_pending');
        res.status(409).json({ status, ...err.toBody() });
        return undefined;
      }
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
    handler: async ({ body, principal }) => ({ canceled_count: await queue.clear(principal, body.model) }),
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
      const m = await queue.metrics(principal, query.model);
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
    handler: async ({ body, principal, res }) => {
      const claim = await queue.takeNextJob(principal, body.model, body, res);
      if (claim) return claim;
      res.status(204).end();
      return undefined;
    },
  });

  router.add({
    method: 'post',
    path: '/queue/update',
    operationId: 'updateQueueJob',
    summary: 'Worker protocol: report progress and info; keeps the claim alive for another claim timeout',
    tags: ['queue worker protocol'],
    body: UpdateJobBody,
    errors: [404, 409],
    response: { status: 200, description: 'The job', schema: JobStatusSchema },
    handler: async ({ body, principal }) => toJobStatus(await queue.update(principal, body)),
  });

  router.add({
    method: 'post',
    path: '/queue/complete',
    operationId: 'completeQueueJob',
    summary: 'Worker protocol: the job is done, with its outputs; with claim_next, also the next claim',
    tags: ['queue worker protocol'],
    body: CompleteBody,
    errors: [404, 409],
    response: { status: 200, description: 'The job (and the next claim)', schema: ReportedJobSchema },
    handler: ({ body, principal, res }) =>
      queue.report(principal, body, { status: 'done', outputs: body.outputs, info: body.info }, res),
  });

  router.add({
    method: 'post',
    path: '/queue/fail',
    operationId: 'failQueueJob',
    summary: 'Worker protocol: the job failed; it is not retried; with claim_next, also the next claim',
    tags: ['queue worker protocol'],
    body: FailBody,
    errors: [404, 409],
    response: { status: 200, description: 'The job (and the next claim)', schema: ReportedJobSchema },
    handler: ({ body, principal, res }) =>
      queue.report(principal, body, { status: 'failed', error: body.error, info: body.info }, res),
  });
}
