/**
 * Starting a resource's workflow the way operators expect to find it: a
 * readable id, Gantry's search attributes (project, resource type and id,
 * status), a static summary and details for the Temporal UI, and a deadline
 * so a Temporal outage is a prompt 503 rather than a hanging request.
 */
import type { Client } from '@temporalio/client';
import type { Workflow } from '@temporalio/common';
import { SA_GPU_TYPE, SA_PROJECT_ID, SA_RESOURCE_ID, SA_RESOURCE_TYPE, SA_STATUS } from '../common/search-attributes';
import { CONTROL_TASK_QUEUE } from '../workers/task-queues';

export const TEMPORAL_CALL_DEADLINE_MS = 5_000;

export async function startResourceWorkflow<W extends Workflow>(
  temporal: Client,
  w: {
    workflowType: string;
    workflowId: string;
    args: Parameters<W>;
    projectId: string;
    resourceType: string;
    resourceId: string;
    status: string;
    summary: string;
    details: string;
    /** Accelerator type, for resources that have one (clusters). */
    gpuType?: string;
  },
): Promise<void> {
  await temporal.connection.withDeadline(Date.now() + TEMPORAL_CALL_DEADLINE_MS, () =>
    temporal.workflow.start<W>(w.workflowType, {
      workflowId: w.workflowId,
      taskQueue: CONTROL_TASK_QUEUE,
      args: w.args as never,
      typedSearchAttributes: [
        { key: SA_PROJECT_ID, value: w.projectId },
        { key: SA_RESOURCE_TYPE, value: w.resourceType },
        { key: SA_RESOURCE_ID, value: w.resourceId },
        { key: SA_STATUS, value: w.status },
        ...(w.gpuType ? [{ key: SA_GPU_TYPE, value: w.gpuType }] : []),
      ],
      staticSummary: w.summary,
      staticDetails: w.details,
    }),
  );
}
