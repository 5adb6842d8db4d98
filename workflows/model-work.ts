/**
 * The activity options of the workflows that make model calls for a user's work, batches and
 * evaluations: bookkeeping (reading the input, writing results) and the slices of calls, which
 * heartbeat so a lost worker's slice is retried elsewhere soon, and stop for good only when the
 * key that created the work no longer works.
 */
import type { ActivityOptions } from '@temporalio/workflow';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export const BOOKKEEPING_OPTIONS: ActivityOptions = {
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 minutes',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
};

export const SLICE_OPTIONS: ActivityOptions = {
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '6 hours',
  // A slice heartbeats every few seconds; a lost worker's slice is retried elsewhere soon after.
  heartbeatTimeout: '10 seconds',
  // Transient failures (a busy or restarting model) retry until the work's end; a revoked key does not.
  retry: { initialInterval: '1 second', maximumInterval: '1 minute', nonRetryableErrorTypes: ['ApiKeyRevoked'] },
};
