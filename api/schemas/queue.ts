/** The async job queue (spec: Queue; the SDK's beta.jig.queue): what the API takes and answers. */
import { z } from 'zod';

const JsonObject = z.record(z.string(), z.unknown());
export const Model = z.string().min(1).max(256);

export const SubmitBody = z.object({
  model: Model,
  payload: JsonObject,
  priority: z.number().int().default(0),
  info: JsonObject.optional(),
});
/** The new job's id, in both spellings: the spec says request_id, the SDK reads requestId. */
export const SubmittedJobSchema = z.object({ request_id: z.string(), requestId: z.string() });
/** `{model}`: which queue (a deployment name), as a body or a query. */
export const ModelRef = z.object({ model: Model });
export const JobRef = z.object({ model: Model, request_id: z.string().min(1).max(128) });
export const ClaimBody = z.object({
  model: Model,
  worker_id: z.string().max(256).optional(),
  claim_timeout_seconds: z.number().int().min(1).max(3600).default(60),
  wait_seconds: z.number().min(0).max(20).default(0),
});
export const ClaimRef = JobRef.extend({ claim_token: z.string().min(1).max(128) });
export const UpdateJobBody = ClaimRef.extend({ info: JsonObject.optional(), progress: z.number().optional() });
/**
 * On complete or fail: take the queue's next job in the same call (the worker's next claim), so a
 * busy worker makes one request per job instead of two. Same fields and defaults as a claim.
 */
export const ClaimNext = ClaimBody.omit({ model: true });
export const CompleteBody = ClaimRef.extend({
  outputs: JsonObject.default({}),
  info: JsonObject.optional(),
  claim_next: ClaimNext.optional(),
});
export const FailBody = ClaimRef.extend({
  error: z.string().min(1).max(10_000),
  info: JsonObject.optional(),
  claim_next: ClaimNext.optional(),
});

export const STATUS = z.enum(['pending', 'running', 'done', 'failed', 'canceled']);
export const JobCanceledSchema = z.object({ status: STATUS });
export const QueueClearedSchema = z.object({ canceled_count: z.number().int() });
export const QueueMetricsSchema = z.object({
  messages_waiting: z.number().int(),
  messages_running: z.number().int(),
  total_jobs: z.number().int(),
});
export const JobStatusSchema = z
  .object({
    request_id: z.string(),
    model: z.string(),
    status: STATUS,
    priority: z.number().int(),
    retries: z.number().int(),
    info: JsonObject,
    inputs: JsonObject,
    outputs: JsonObject.optional(),
    error: z.string().optional(),
    warnings: z.array(z.string()),
    created_at: z.string(),
    claimed_at: z.string().optional(),
    done_at: z.string().optional(),
    history: z.array(z.object({ status: STATUS, at: z.string(), note: z.string().optional() })),
  })
  .meta({ id: 'QueueJobStatus' });
export const ClaimSchema = z.object({
  request_id: z.string(),
  model: z.string(),
  payload: JsonObject,
  info: JsonObject,
  priority: z.number().int(),
  retries: z.number().int(),
  claim_token: z.string(),
  claim_timeout_seconds: z.number().int(),
});
/** What complete and fail answer: the job, and with claim_next the next claim (null: none came within the wait). */
export const ReportedJobSchema = JobStatusSchema.extend({ next_claim: ClaimSchema.nullable().optional() });
