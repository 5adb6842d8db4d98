/**
 * The workflow test tier: Temporal's time-skipping test server (real, from
 * Maven Central: scripts/lib/workflow-test-server.ts) running the real
 * workflow bundle, with activities supplied by the test. Activities are typed
 * from their real implementations (`Partial<ClusterActivities>` and so on), so
 * a stub that drifts from the real signature fails the type-check.
 *
 * Time is under the test's control. This server, run as its own process,
 * does not hold time still while an external worker runs a workflow or
 * activity task, so free-running time skipping (what `handle.result()` turns
 * on) can jump past a task's timeout while the task is in flight. The
 * environment therefore starts with skipping locked (time passes as on a wall
 * clock), and `advance()` moves it forward in steps shorter than any task
 * timeout, letting the workers answer between steps: a 300 s drain passes in
 * about a second.
 */
import { historyToJSON } from '@temporalio/common/lib/proto-utils';
import { msToTs } from '@temporalio/common/lib/time';
import { WorkflowNotFoundError, isGrpcServiceError, type WorkflowHandle } from '@temporalio/client';
import { after, afterEach, before } from 'node:test';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker, makeTelemetryFilterString, type WorkerOptions } from '@temporalio/worker';
import { writeRecordedHistory } from '../../scripts/lib/recorded-histories';
import { CLASSPATH_ENV, WORKFLOW_TEST_SERVER, ensureWorkflowTestServer } from '../../scripts/lib/workflow-test-server';
import { workflowSource } from '../../workers/workflow-code';
import { withoutWorkflowPromiseHook } from './workflow-promise-hook';
import { GANTRY_SEARCH_ATTRIBUTES } from '../../shared/search-attributes';
import { INDEXED_TYPE } from '../../platform/temporal';
import { temporal } from '@temporalio/proto';

let runtimeInstalled = false;

export interface WorkflowTestEnv {
  env: TestWorkflowEnvironment;
  /**
   * Moves the server's clock forward by `ms`, in steps of at most `stepMs` (default 5 s, half a
   * workflow task timeout). A step that takes more than 15 s of real time (the server holds time
   * while a task is outstanding) prints what the watched runs are waiting on.
   */
  advance(ms: number, stepMs?: number): Promise<void>;
  /** Adds a run to those `advance` describes when a step stalls. */
  watch(handle: WorkflowHandle): void;
  /** Waits in real time (at most 45 s) until the run closes, then returns its result (never unlocking time skipping). */
  finished<T>(handle: WorkflowHandle): Promise<T>;
  /** A worker on `taskQueue` running the real workflows with these activities (and these worker options). */
  worker(taskQueue: string, activities: object, options?: Partial<WorkerOptions>): Promise<Worker>;
}

interface ServerOfFile extends WorkflowTestEnv {
  /**
   * Ends a test: its workers stopped, every run it left open terminated, nothing watched. False
   * when the server's clock stays locked after that (see CLOCK_PROBE_MS): it cannot serve another test.
   */
  endTest(): Promise<boolean>;
  teardown(): Promise<void>;
}

/**
 * The workflow tier's environment: one time-skipping server for the file (started before its
 * first test, stopped after its last), as a JVM per test cost seconds of CPU each. Tests share its
 * clock, which only moves forward; what one test leaves (workers, open runs) is ended before the
 * next begins, so each sees only its own runs and activities. Call at the top of the file or a
 * describe; use the result inside tests.
 */
export function workflowTestEnvForFile(): WorkflowTestEnv {
  let server: ServerOfFile | undefined;
  before(async () => {
    server = await createWorkflowTestEnv();
  });
  afterEach(async (ctx) => {
    if (!server) return;
    let ended: unknown;
    try {
      if (await server.endTest()) return;
      process.stderr.write(
        `[workflow-env] "${ctx.name}" left the test server's clock locked (sdk-java#1138: a run that ends ` +
          'with a task outstanding never releases its time lock); the next test gets a new server\n',
      );
    } catch (err) {
      ended = err; // the server did not answer: the next test gets a new one, and this hook fails
    }
    await server.teardown();
    server = await createWorkflowTestEnv();
    if (ended) throw ended;
  });
  after(() => server?.teardown());
  const current = (): ServerOfFile => {
    if (!server) throw new Error('the workflow test server is started by before(): use it inside a test');
    return server;
  };
  return {
    get env() {
      return current().env;
    },
    advance: (ms, stepMs) => current().advance(ms, stepMs),
    watch: (handle) => current().watch(handle),
    finished: (handle) => current().finished(handle),
    worker: (taskQueue, activities, options) => current().worker(taskQueue, activities, options),
  };
}

/** Gantry's search attributes, registered the way the test server takes them (it has no list call). */
async function registerSearchAttributes(env: TestWorkflowEnvironment): Promise<void> {
  const searchAttributes: Record<string, temporal.api.enums.v1.IndexedValueType> = {};
  for (const key of GANTRY_SEARCH_ATTRIBUTES) searchAttributes[key.name] = INDEXED_TYPE[key.type];
  await env.connection.operatorService.addSearchAttributes({ namespace: env.namespace ?? 'default', searchAttributes });
}

async function createWorkflowTestEnv(): Promise<ServerOfFile> {
  if (!runtimeInstalled) {
    // Core warns on every worker that this server predates heartbeat-detail preservation; only errors matter here.
    Runtime.install({
      logger: new DefaultLogger('WARN'),
      telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'ERROR', other: 'ERROR' }) } },
    });
    withoutWorkflowPromiseHook();
    runtimeInstalled = true;
  }
  // test/run.ts resolves the server once for all files; a file run alone resolves it itself.
  process.env[CLASSPATH_ENV] ??= await ensureWorkflowTestServer((line) => process.stderr.write(`${line}\n`));
  const env = await startTimeSkippingServer();
  await registerSearchAttributes(env);
  await env.connection.testService!.lockTimeSkipping({});
  const workers: Worker[] = [];
  const watched = new Set<WorkflowHandle>();
  const stopWorkers = async () => {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    const deadline = Date.now() + 15_000;
    const stopping = () => workers.some((w) => ['RUNNING', 'STOPPING', 'DRAINING', 'DRAINED'].includes(w.getState()));
    while (stopping() && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    workers.length = 0;
  };
  const server: ServerOfFile = {
    env,
    async advance(ms, stepMs = 5_000) {
      for (let left = ms; left > 0; left -= stepMs) {
        const step = env.connection.testService!.unlockTimeSkippingWithSleep({
          duration: msToTs(Math.min(stepMs, left)),
        });
        const stalled = setTimeout(() => void reportStall(watched, ms - left), STALLED_STEP_MS);
        try {
          await step;
        } finally {
          clearTimeout(stalled);
        }
        await new Promise((r) => setTimeout(r, 15)); // the workers answer what the step made due
      }
    },
    watch(handle) {
      watched.add(handle);
    },
    async finished<T>(handle: WorkflowHandle): Promise<T> {
      // Bounded, so a run that never closes fails here with where it stands, not as a test timeout.
      const deadline = Date.now() + 45_000;
      while ((await handle.describe()).status.name === 'RUNNING') {
        if (Date.now() > deadline) {
          throw new Error(`${handle.workflowId} still running after 45 s: ${await waitingOn(handle)}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
      return (await handle.result()) as T;
    },
    async worker(taskQueue, activities, options = {}) {
      const w = await Worker.create({
        ...options,
        connection: env.nativeConnection,
        namespace: env.namespace ?? 'default',
        taskQueue,
        ...workflowSource(),
        activities,
        // Workflows run in this thread, as the SDK's own replay workers run them: a worker thread of
        // its own costs each worker 0.5-2 s of CPU to load the SDK (through tsx's loader hooks), a
        // third of adapter-decisions' CPU, which starts many workers. The SDK's 5 s deadlock limit
        // is off here; a run stuck in a loop fails its test by the test's timeout instead.
        debugMode: true,
        // Cancellation reaches a heartbeating activity at its next heartbeat sent to the server.
        defaultHeartbeatThrottleInterval: '200 milliseconds',
        maxHeartbeatThrottleInterval: '200 milliseconds',
      });
      workers.push(w);
      return w;
    },
    async endTest() {
      // A test that timed out leaves its workers running (its body never reached their shutdown):
      // stop them first, or they keep polling, and answering, into the next test.
      await stopWorkers();
      watched.clear();
      // A run left open would fire its timers, and hold the shared clock, in later tests.
      const namespace = env.namespace ?? 'default';
      const { executions } = await env.connection.workflowService.listOpenWorkflowExecutions({ namespace });
      for (const { execution } of executions ?? []) {
        await env.client.workflow
          .getHandle(execution!.workflowId!, execution!.runId!)
          .terminate('the test is over')
          .catch((err: Error) => {
            // A child ends with the parent that owned it: already closed is what was wanted.
            if (!(err instanceof WorkflowNotFoundError)) throw err;
          });
      }
      return clockIsFree(env);
    },
    async teardown() {
      // After endTest (afterEach), or in place of it when the server is to go: its workers, then the JVM.
      await stopWorkers();
      await env.teardown();
    },
  };
  return server;
}

/**
 * Whether the server's clock skips again once the test's own lock is lifted: a minute of its time
 * passes in at most this much real time. The test server keeps a count of time locks (a scheduled
 * task, a pending activity, the test's own) and skips only at zero; a run that ends with a task
 * outstanding (terminated, or completed with an activity pending) never gives its lock back
 * (sdk-java#1138), and every later `advance` would then wait out its time on the wall clock.
 */
const CLOCK_PROBE_MS = 3_000;
/** gRPC's status codes for a call that its deadline ended: CANCELLED, DEADLINE_EXCEEDED. */
const GRPC_PAST_DEADLINE: number[] = [1, 4];

async function clockIsFree(env: TestWorkflowEnvironment): Promise<boolean> {
  try {
    await env.connection.withDeadline(Date.now() + CLOCK_PROBE_MS, () =>
      env.connection.testService!.unlockTimeSkippingWithSleep({ duration: msToTs(60_000) }),
    );
    return true;
  } catch (err) {
    // Past its deadline the call ends DEADLINE_EXCEEDED, or CANCELLED when the client's retry
    // layer gives it up first.
    if (isGrpcServiceError(err) && GRPC_PAST_DEADLINE.includes(err.code)) return false;
    throw err;
  }
}

/** A step of `advance` that takes this long in real time is reported (it normally takes milliseconds). */
const STALLED_STEP_MS = 15_000;

/** What each watched run is waiting on, printed while a step of `advance` is held up (a hang's diagnosis). */
async function reportStall(watched: Set<WorkflowHandle>, advancedMs: number): Promise<void> {
  const lines = [`[workflow-env] a time step has not ended in ${STALLED_STEP_MS / 1000} s (${advancedMs} ms advanced)`];
  for (const handle of watched) {
    try {
      lines.push(`  ${handle.workflowId}: ${await waitingOn(handle)}`);
    } catch (err) {
      lines.push(`  ${handle.workflowId}: not described (${(err as Error).message})`);
    }
  }
  process.stderr.write(`${lines.join('\n')}\n`);
}

/** A run's status, pending workflow task and pending activities, in a line. */
export async function waitingOn(handle: WorkflowHandle): Promise<string> {
  const d = await handle.describe();
  const task = d.raw.pendingWorkflowTask;
  const activities = (d.raw.pendingActivities ?? []).map(
    (a) =>
      `${a.activityType?.name} (${a.state}, attempt ${a.attempt}` +
      (a.lastHeartbeatTime?.seconds
        ? `, last heartbeat ${new Date(Number(a.lastHeartbeatTime.seconds) * 1000).toISOString()}`
        : '') +
      (a.lastFailure?.message ? `, last failure: ${a.lastFailure.message}` : '') +
      ')',
  );
  // The run's last events: whether an update that hangs was ever admitted, accepted or answered,
  // and what timer, if any, the run waits on.
  const events = (await handle.fetchHistory()).events ?? [];
  const last = events.slice(-8).map((e) => EVENT_NAMES[e.eventType ?? 0] ?? String(e.eventType));
  return (
    `${d.status.name}, run ${d.runId}; workflow task: ${task ? `${task.state}, attempt ${task.attempt}` : 'none'}; ` +
    `activities: ${activities.join(', ') || 'none'}; last events: ${last.join(', ')}`
  );
}

/**
 * A run's history, an event a line from the last `count`: its id, its time (UTC), its
 * type, and what it names (the activity's type, the event it answers, a failure's message, a
 * timer's length). What a test prints when a run did not do what it should.
 */
export async function historyLines(handle: WorkflowHandle, count = 60): Promise<string> {
  const events = (await handle.fetchHistory()).events ?? [];
  const at = (e: (typeof events)[number]) =>
    Number(e.eventTime?.seconds ?? 0) * 1000 + Math.floor((e.eventTime?.nanos ?? 0) / 1e6);
  const types = new Map<number, string>();
  return events
    .slice(-count)
    .map((e) => {
      const id = Number(e.eventId);
      const detail: string[] = [];
      const scheduled = e.activityTaskScheduledEventAttributes;
      if (scheduled) {
        types.set(id, scheduled.activityType?.name ?? '?');
        detail.push(`${scheduled.activityType?.name} #${scheduled.activityId} on ${scheduled.taskQueue?.name}`);
      }
      for (const answer of [
        e.activityTaskStartedEventAttributes,
        e.activityTaskCompletedEventAttributes,
        e.activityTaskFailedEventAttributes,
        e.activityTaskTimedOutEventAttributes,
        e.activityTaskCanceledEventAttributes,
        e.activityTaskCancelRequestedEventAttributes,
      ]) {
        if (answer && 'scheduledEventId' in answer && answer.scheduledEventId) {
          const of = Number(answer.scheduledEventId);
          detail.push(`of ${of}${types.has(of) ? ` (${types.get(of)})` : ''}`);
        }
        if (answer && 'failure' in answer && answer.failure?.message) detail.push(answer.failure.message);
      }
      if (e.timerStartedEventAttributes?.startToFireTimeout)
        detail.push(`${Number(e.timerStartedEventAttributes.startToFireTimeout.seconds ?? 0)} s`);
      const signal = e.workflowExecutionSignaledEventAttributes?.signalName;
      if (signal) detail.push(signal);
      const name = EVENT_NAMES[e.eventType ?? 0] ?? String(e.eventType);
      return `${id} ${new Date(at(e)).toISOString().slice(11, 23)} ${name}${detail.length ? ` ${detail.join('; ')}` : ''}`;
    })
    .join('\n');
}

const EVENT_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(temporal.api.enums.v1.EventType).map(([name, n]) => [n, name.replace(/^EVENT_TYPE_/, '')]),
);

/** `promise`, or after `ms` of real time an error that says what the run is waiting on (a hang made a failure). */
export async function inTime<T>(promise: Promise<T>, ms: number, what: string, handle: WorkflowHandle): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      waitingOn(handle).then(
        (w) => reject(new Error(`${what}: not done in ${ms / 1000} s; ${handle.workflowId} is ${w}`)),
        (err: Error) => reject(new Error(`${what}: not done in ${ms / 1000} s (${err.message})`)),
      );
    }, ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `worker` until `fn` settles (what the SDK's runUntil does), for tests
 * that start several workers.
 */
export async function runWorkers<T>(workers: Worker[], fn: () => Promise<T>): Promise<T> {
  const running = workers.map((w) => w.run());
  try {
    return await fn();
  } finally {
    for (const w of workers) if (w.getState() === 'RUNNING') w.shutdown();
    await Promise.all(running);
  }
}

/**
 * Writes a run's history to test/replay/histories/<type>-<label>.json when
 * GANTRY_RECORD_HISTORIES=1 and the file does not exist yet (recorded
 * histories are never overwritten). This is how a scenario that reaches a new
 * `patched()` branch becomes a recorded history for the replay test.
 */
export async function recordHistoryIfAsked(handle: WorkflowHandle, type: string, label: string): Promise<void> {
  if (process.env.GANTRY_RECORD_HISTORIES !== '1') return;
  writeRecordedHistory(type, label, historyToJSON(await handle.fetchHistory()));
}

/** Polls `read` in real time until `ok` holds (the workflows run beside the test); `ok` must fail on undefined. */
export async function until<T>(
  read: () => T | Promise<T>,
  ok: (v: T) => boolean,
  what: string,
  ms = 15_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Events in every run of a workflow so far, oldest first (each run continued as new from the one before). */
/**
 * The Java test server, started as the SDK starts it. The SDK gives a server 5 s to listen; on two
 * cores busy with other files a JVM can take longer, which says nothing about the test: it is
 * started again, a few times.
 */
async function startTimeSkippingServer(): Promise<TestWorkflowEnvironment> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await TestWorkflowEnvironment.createTimeSkipping({
        server: { executable: { type: 'existing-path', path: WORKFLOW_TEST_SERVER } },
      });
    } catch (err) {
      if (attempt >= 3 || !/did not start within/.test(String((err as Error).message))) throw err;
      process.stderr.write(`the workflow test server did not start in time (attempt ${attempt}); starting it again\n`);
    }
  }
}

export async function historyLengths(env: TestWorkflowEnvironment, handle: WorkflowHandle): Promise<number[]> {
  const runs: number[] = [];
  for (let runId: string | undefined = (await handle.describe()).runId; runId;) {
    const history = await env.client.workflow.getHandle(handle.workflowId, runId).fetchHistory();
    runs.unshift(history.events!.length);
    runId = history.events![0].workflowExecutionStartedEventAttributes?.continuedExecutionRunId || undefined;
  }
  return runs;
}
