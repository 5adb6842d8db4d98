/** Batches (`/v1/batches`; the SDKs' `batches`): what the API takes and answers, as the pinned SDKs type it. */
import { z } from 'zod';
import { BATCH_ENDPOINTS, BATCH_STATUSES, completionWindowSeconds } from '../../shared/batches';

export const CreateBatchBody = z.object({
  endpoint: z.enum(BATCH_ENDPOINTS).describe('Each line of the input file is sent to this endpoint'),
  input_file_id: z.string().min(1).max(128).describe('A file of purpose batch-api: one `{custom_id, body}` per line'),
  completion_window: z
    .string()
    .max(16)
    .refine((w) => completionWindowSeconds(w) !== null, 'a duration such as 24h, 90m or 2d (at most 30d)')
    // Durations of 1 s to 30 d in their plain spelling, each one completionWindowSeconds takes.
    .meta({ pattern: '^([1-9]\\d{0,5}s|[1-9]\\d{0,3}m|([1-9]\\d?|[1-6]\\d\\d|7[01]\\d|720)h|([1-9]|[12]\\d|30)d)$' })
    .optional()
    .describe('How long the batch may run (default 24h); lines not answered by then are not run (EXPIRED)'),
  model_id: z.string().min(1).max(256).optional().describe('The model of lines whose body names none'),
  priority: z.number().int().optional(),
});

export const BatchParams = z.object({ id: z.string().min(1).max(128) });

export const BatchJobSchema = z
  .object({
    id: z.string(),
    user_id: z.string().optional(),
    input_file_id: z.string(),
    file_size_bytes: z.number().optional(),
    status: z.enum(BATCH_STATUSES),
    job_deadline: z.string(),
    created_at: z.string(),
    endpoint: z.string(),
    progress: z.number().describe('Percent of the lines answered, 0 to 100'),
    model_id: z.string().optional(),
    output_file_id: z.string().optional(),
    error_file_id: z.string().optional(),
    error: z.string().optional(),
    completed_at: z.string().optional(),
    completion_window: z.string(),
    priority: z.number().optional(),
  })
  .meta({ id: 'BatchJob' });

export const CreateBatchResponseSchema = z.object({ job: BatchJobSchema, warning: z.string().optional() });
export const BatchListSchema = z.array(BatchJobSchema);
