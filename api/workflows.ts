/**
 * Starting a resource's workflow the way operators expect to find it: a
 * readable id, Gantry's search attributes (project, resource type and id,
 * status), a static summary and details for the Temporal UI, and a deadline
 * so a Temporal outage is a prompt 503 rather than a hanging request; and
 * the one typed way routes update and signal entity workflows.
 */
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  WorkflowUpdateFailedError,
  type Client,
} from '@temporalio/client';
import { ApplicationFailure, type SignalDefinition, type UpdateDefinition, type Workflow } from '@temporalio/common';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import { badRequest, conflict, notFound } from './errors';
import {
  SA_GPU_TYPE,
  SA_PROJECT_ID,
  SA_RESOURCE_ID,
  SA_RESOURCE_TYPE,
  statusSearchAttributes,
} from '../shared/search-attributes';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export const TEMPORAL_CALL_DEADLINE_MS = 5_000;

export interface ResourceWorkflowStart<W extends Workflow> {
  /** The workflow function (exported by workflows/): the server runs the type of its name. */
  workflow: W;
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
  /** Human names for the memo (the ids are search attributes already). */
  names?: { projectSlug?: string; resource?: string };
}

/** The options of a resource's run: its queue, search attributes, summary and memo. */
export function resourceRunOptions<W extends Workflow>(w: ResourceWorkflowStart<W>) {
  return {
    workflowId: w.workflowId,
    taskQueue: CONTROL_TASK_QUEUE,
    args: w.args as never,
    typedSearchAttributes: [
      { key: SA_PROJECT_ID, value: w.projectId },
      { key: SA_RESOURCE_TYPE, value: w.resourceType },
      { key: SA_RESOURCE_ID, value: w.resourceId },
      ...statusSearchAttributes(w.status),
      ...(w.gpuType ? [{ key: SA_GPU_TYPE, value: w.gpuType }] : []),
    ],
    staticSummary: w.summary,
    staticDetails: w.details,
    // The static summary stays with the first run only; the memo is carried to every run that
    // continues as new, so an entity's later runs still say what it is and whose.
    memo: {
      summary: w.summary,
      ...(w.names?.projectSlug ? { project: w.names.projectSlug } : {}),
      ...(w.names?.resource ? { resource: w.names.resource } : {}),
    },
  };
}

/**
 * Signals a long-lived resource workflow (a queue's dispatcher), starting it first when no run is
 * open, within the same deadline as a start: throws when the signal was not delivered.
 */
export async function signalWithStartResourceWorkflow<W extends Workflow>(
  temporal: Client,
  w: ResourceWorkflowStart<W>,
  signal: SignalDefinition<[]>,
): Promise<void> {
  await temporal.connection.withDeadline(Date.now() + TEMPORAL_CALL_DEADLINE_MS, () =>
    temporal.workflow.signalWithStart<W, []>(w.workflow, { ...resourceRunOptions(w), signal, signalArgs: [] }),
  );
}

/**
 * Starts the run, or throws when it did not start: a start whose answer was lost after the server
 * took it counts as started, so callers may undo their own writes on a throw.
 */
export async function startResourceWorkflow<W extends Workflow>(
  temporal: Client,
  w: ResourceWorkflowStart<W>,
  /** How long the start call may take (a test shortens it to provoke a lost answer). */
  deadlineMs = TEMPORAL_CALL_DEADLINE_MS,
): Promise<void> {
  const asked = Date.now();
  try {
    await startWithDeadline(temporal, w, deadlineMs);
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) throw err;
    // The call can fail after the server started the run (the deadline cut the answer short, the
    // connection dropped): a caller that then removed the resource's row would orphan a running
    // workflow. Ask the server before reporting a failure.
    if (await startedSince(temporal, w.workflowId, asked)) return;
    throw err;
  }
}

/**
 * The one compensation policy of a create (docs/decisions/0001): its rows are written first, then
 * this starts its workflow; when the run did not start, `undo` removes what the create wrote and
 * the start's error goes to the caller. A start whose answer was lost after the server took it
 * counts as started (startResourceWorkflow), so `undo` never orphans a running workflow. When
 * `undo` fails too, the start's error is still the one thrown, with the undo's attached to it as
 * `undoError`, for the log.
 */
export async function startResourceWorkflowOrUndo<W extends Workflow>(
  temporal: Client,
  w: ResourceWorkflowStart<W>,
  undo: () => Promise<unknown>,
): Promise<void> {
  try {
    await startResourceWorkflow(temporal, w);
  } catch (err) {
    try {
      await undo();
    } catch (undoError) {
      if (err instanceof Error) Object.assign(err, { undoError });
    }
    throw err;
  }
}

/** True when a run of `workflowId` started at or after `since` (server clocks may lag a little). */
async function startedSince(temporal: Client, workflowId: string, since: number): Promise<boolean> {
  // Brief: when the server is unreachable the caller's 503 should not wait long for this.
  for (let attempt = 1; attempt <= 2; attempt++) {
    try {
      const d = await temporal.connection.withDeadline(Date.now() + 1_000, () =>
        temporal.workflow.getHandle(workflowId).describe(),
      );
      return d.status.name === 'RUNNING' || d.startTime.getTime() >= since - 1_000;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return false;
      await new Promise((r) => setTimeout(r, 250 * attempt));
    }
  }
  return false; // the server cannot be asked: report the failure the start call saw
}

async function startWithDeadline<W extends Workflow>(
  temporal: Client,
  w: ResourceWorkflowStart<W>,
  deadlineMs: number,
): Promise<void> {
  await temporal.connection.withDeadline(Date.now() + deadlineMs, () =>
    temporal.workflow.start(w.workflow, resourceRunOptions(w)),
  );
}

/** An update waits for its handler (which writes PostgreSQL): it gets more time than a plain call. */
const UPDATE_DEADLINE_MS = TEMPORAL_CALL_DEADLINE_MS * 6;

/**
 * Sends an Update to an entity workflow (a cluster, a deployment, a rollout), named by its
 * definition (`defineUpdate` in workflows/), so its arguments and result are typed. While the
 * entity continues as new it is briefly "not found": the update is tried again on the next run
 * before the error reaches the caller. The workflow's refusal comes back as the API error it
 * means (updateRejection); other errors as they are.
 *
 * With the caller's idempotency key the Update carries an id made from it, and
 * the server answers a repeat of an Update it has accepted with the first one's
 * outcome instead of running it again: a client retry after a lost answer (or
 * this function's own retry) changes the entity once. The server keeps those
 * ids per run, so a retry that lands after the entity continued as new is
 * treated as new: most Updates set absolute values, and the others (approve,
 * promote) are refused as a conflict the second time.
 *
 * This is the one way the API sends an entity an Update. `whenGone` is the area's answer when
 * the entity's workflow has ended (or never started): the error thrown instead of Temporal's
 * not-found.
 */
export async function executeEntityUpdate<Ret, Args extends unknown[]>(
  temporal: Client,
  workflowId: string,
  update: UpdateDefinition<Ret, Args>,
  args: Args,
  idempotencyKey?: string,
  whenGone?: Error,
): Promise<Ret> {
  const handle = temporal.workflow.getHandle(workflowId);
  const updateId = idempotencyKey ? `${update.name}/${idempotencyKey}` : undefined;
  for (let attempt = 1; ; attempt++) {
    try {
      return await temporal.connection.withDeadline(Date.now() + UPDATE_DEADLINE_MS, () =>
        // The client's overloads split updates with and without arguments; `Args` covers both.
        handle.executeUpdate(update as unknown as UpdateDefinition<Ret, [unknown]>, {
          args: args as unknown as [unknown],
          updateId,
        }),
      );
    } catch (err) {
      if (err instanceof WorkflowNotFoundError && attempt < 4) {
        await new Promise((r) => setTimeout(r, 250 * attempt));
        continue;
      }
      if (err instanceof WorkflowNotFoundError && whenGone) throw whenGone;
      throw updateRejection(err);
    }
  }
}

/**
 * Sends a Signal to a running workflow, named by its definition. `deadlineMs` bounds the call
 * (a Temporal outage is then a prompt 503); `null` waits as long as the server takes, for a
 * signal sent after writes that cannot be undone, where a timeout would tell the client its
 * change failed when it was made (a stored upload). `whenGone` as for executeEntityUpdate.
 */
export async function signalWorkflow<Args extends unknown[]>(
  temporal: Client,
  workflowId: string,
  signal: SignalDefinition<Args>,
  args: Args,
  deadlineMs: number | null = TEMPORAL_CALL_DEADLINE_MS,
  whenGone?: Error,
): Promise<void> {
  const handle = temporal.workflow.getHandle(workflowId);
  const send = () => handle.signal(signal, ...args);
  try {
    if (deadlineMs === null) await send();
    else await temporal.connection.withDeadline(Date.now() + deadlineMs, send);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError && whenGone) throw whenGone;
    throw err;
  }
}

/**
 * The one mapping from an entity workflow's refused Update to the API error its validator meant
 * (shared/update-rejections.ts, workflows/entity-kit.ts refuse): 400 naming the field, 404, or
 * 409, with the error code the validator gave. Other errors as they are.
 */
export function updateRejection(err: unknown): unknown {
  if (err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure) {
    const f = err.cause;
    const detail = (i: number) => (typeof f.details?.[i] === 'string' ? (f.details[i] as string) : null);
    const [param, code] = [detail(0), detail(1)];
    if (f.type === UPDATE_REJECTIONS.invalid) return badRequest(f.message, param, code);
    if (f.type === UPDATE_REJECTIONS.notFound) return notFound(f.message, code);
    if (f.type === UPDATE_REJECTIONS.conflict) return conflict(f.message, code);
  }
  return err;
}
