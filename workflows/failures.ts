/**
 * Reading the failures workflows catch: the one place that says what an
 * activity's or a child's failure means. Workflow code (no Node APIs); helpers,
 * not workflows (arrow constants, so nothing here reads as a workflow type).
 */
import { ActivityFailure, ApplicationFailure, ChildWorkflowFailure, TimeoutFailure } from '@temporalio/workflow';
import { TimeoutType } from '@temporalio/common';

/** True when no worker took the activity in time: nobody serves its task queue. */
export const isScheduleToStart = (err: unknown): boolean => {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return cause instanceof TimeoutFailure && cause.timeoutType === TimeoutType.SCHEDULE_TO_START;
};

/** True when a running activity stopped heartbeating: its worker may still be doing the work. */
export const isHeartbeatTimeout = (err: unknown): boolean => {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return cause instanceof TimeoutFailure && cause.timeoutType === TimeoutType.HEARTBEAT;
};

/** True when an activity failed with an ApplicationFailure of this type (set by the activity). */
export const isFailureOfType = (err: unknown, type: string): boolean => {
  const cause = err instanceof ActivityFailure ? err.cause : undefined;
  return cause instanceof ApplicationFailure && cause.type === type;
};

/** The root cause's message (an activity's or a child's failure wraps what went wrong). */
export const failureMessage = (err: unknown): string => {
  let e = err;
  while ((e instanceof ActivityFailure || e instanceof ChildWorkflowFailure) && e.cause) e = e.cause;
  return e instanceof Error ? e.message : String(e);
};
