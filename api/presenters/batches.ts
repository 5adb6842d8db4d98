/**
 * How a batch is shown: the batch object of the pinned SDKs, from its row.
 */
import type { BatchRow } from '../../db/batches';

export const toBatchJob = (b: BatchRow) => ({
  id: b.id,
  ...(b.user_id ? { user_id: b.user_id } : {}),
  input_file_id: b.input_file_id,
  ...(b.file_size_bytes !== null ? { file_size_bytes: Number(b.file_size_bytes) } : {}),
  status: b.status,
  job_deadline: b.job_deadline.toISOString(),
  created_at: b.created_at.toISOString(),
  endpoint: b.endpoint,
  progress: b.total_lines ? Math.round((b.done_lines / b.total_lines) * 10_000) / 100 : 0,
  ...(b.model_id ? { model_id: b.model_id } : {}),
  ...(b.output_file_id ? { output_file_id: b.output_file_id } : {}),
  ...(b.error_file_id ? { error_file_id: b.error_file_id } : {}),
  ...(b.error ? { error: b.error } : {}),
  ...(b.completed_at ? { completed_at: b.completed_at.toISOString() } : {}),
  completion_window: b.completion_window,
  ...(b.priority !== null ? { priority: b.priority } : {}),
});
