/**
 * deployment (`deployment/<id>`): one entity workflow per container
 * deployment. It drives replicas to the desired count through the container
 * runtime: a replica counts once its health check answers; a replica that
 * dies is replaced after a backoff that grows with consecutive failures; a
 * spec change rolls the replicas one at a time (new one ready, then an old one
 * stopped); scale-down and delete give each replica its termination grace.
 * Replica statuses are recorded by the replica activities (replica_events);
 * the deployment's own status is projected on every change.
 */
import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineSignal,
  defineUpdate,
  isCancellation,
  proxyActivities,
  setCurrentDetails,
  setHandler,
  upsertSearchAttributes,
  allHandlersFinished,
  continueAsNew,
  ContinueAsNew,
  patched,
  workflowInfo,
} from '@temporalio/workflow';
import { failureMessage, isHeartbeatTimeout, isScheduleToStart } from './failures';
import type { DeploymentControlActivities, ReplicaActivities } from '../activities/deployments';
import {
  CONTAINERS_TASK_QUEUE,
  activeAutoscaling,
  autoscaleDecision,
  changesReplicaTemplate,
  type ActiveAutoscaling,
  type CarriedDeployment,
  type DeploymentSpec,
  type DeploymentState,
  type DeploymentStatus,
  type DeploymentWorkflowInput,
  type DemandSample,
} from '../common/deployments';
import { statusSearchAttributes } from '../common/search-attributes';
import { UPDATE_REJECTIONS } from '../common/clusters';
import { PATCHES } from './patches';
import { CONTROL_TASK_QUEUE } from '../workers/task-queues';

export const updateDeploymentUpdate = defineUpdate<void, [Partial<DeploymentSpec>]>('updateDeployment');
export const deleteDeploymentUpdate = defineUpdate<void, []>('deleteDeployment');
/**
 * New replica bounds from another workflow (a rollout moving capacity between
 * deployments); workflows cannot send Updates, so this is a signal.
 */
export const setReplicaBoundsSignal =
  defineSignal<[{ min_replicas: number; max_replicas: number }]>('setReplicaBounds');

const control = proxyActivities<DeploymentControlActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});

/** A replica that dies is replaced after 1, 2, 4 ... seconds, up to the configured maximum. */
const backoffSeconds = (failures: number, max: number) => Math.min(max, 2 ** Math.max(0, failures - 1));
const FAILED_AFTER = 3;

export async function deployment(input: DeploymentWorkflowInput): Promise<'deleted'> {
  const { deploymentId, projectId } = input;
  const launcher = proxyActivities<ReplicaActivities>({
    taskQueue: CONTAINERS_TASK_QUEUE,
    // No container host at all is a failure the user should see, not a wait forever.
    scheduleToStartTimeout: `${input.containerWaitSeconds ?? 60} seconds`,
    startToCloseTimeout: '5 minutes',
    heartbeatTimeout: '30 seconds',
    retry: { maximumAttempts: 1 },
  });
  const state: DeploymentState = input.carried?.state ?? {
    revision: 1,
    spec: input.spec,
    desired_replicas: input.spec.min_replicas,
    status: 'Updating',
    deleted: false,
  };
  const live = new Map<
    string,
    { revision: number; hostQueue: string; image: string; scope: CancellationScope; done: Promise<void> }
  >();
  let version = 0;
  // Projections are ordered by (generation, version): each run counts its own versions from 0.
  // A run carried by code that did not count generations is at least the second one.
  const generation = input.carried ? (input.carried.generation ?? 0) + 1 : 0;
  let seq = input.carried?.seq ?? 0;
  let failures = input.carried?.failures ?? 0;
  let retryAt = 0;
  let wake = false;
  // A run started to clean up after a workflow that ended without deleting the deployment starts deleting.
  let deleting = input.deleteOnStart !== undefined;
  // Set when the run failed unexpectedly: the status its compensation projects.
  let failedBecause: string | undefined;
  // The autoscaler's current wish (replicas), its recent observations, and when it last acted.
  let autoscaled: number | undefined = input.carried?.autoscaled;
  let lastScaleAt = input.carried?.lastScaleAt ?? 0;
  let nextObservation = 0;
  const samples: DemandSample[] = [];
  let skippedObservations = 0;

  const clamp = (n: number) => Math.min(state.spec.max_replicas, Math.max(state.spec.min_replicas, n));
  const desired = () =>
    activeAutoscaling(state.spec) && autoscaled !== undefined ? clamp(autoscaled) : state.spec.min_replicas;

  /**
   * One autoscaler observation: the metric's total over the replicas (or the
   * queue's backlog) against `target` per replica. Scale up as soon as the
   * latest observation asks for it; scale down (to min_replicas, zero allowed,
   * when idle) only when the whole time_interval_minutes window agrees and the
   * cool-down has passed.
   */
  /** The autoscaling metric's current total over the replicas, or the queue's backlog. */
  async function measureDemand(a: ActiveAutoscaling): Promise<number> {
    if (a.metric === 'CustomMetric') {
      const scraped = await launcher.scrapeReplicaMetric.executeWithOptions(
        { summary: `scrape ${a.custom_metric_name}` },
        [{ deploymentId, metricName: a.custom_metric_name }],
      );
      return scraped.total;
    }
    if (a.metric === 'HTTPTotalRequests') {
      return control.httpRequests({ deploymentId, windowSeconds: Math.max(1, a.time_interval_minutes ?? 1) * 60 });
    }
    return control.queueBacklog({ deploymentId });
  }

  async function observe(): Promise<void> {
    const a = activeAutoscaling(state.spec)!;
    let demand: number;
    try {
      demand = await measureDemand(a);
    } catch (err) {
      // A metric that cannot be read skips this observation; the replicas stay as they are.
      // (Before this patch a failed scrape failed the whole deployment.)
      if (isCancellation(err) || !patched(PATCHES.skipFailedObservation.id)) throw err;
      skippedObservations++;
      setCurrentDetails(
        `**${state.status}**: autoscaler observation skipped (${skippedObservations} in a row): ${failureMessage(err)}`,
      );
      return;
    }
    skippedObservations = 0;
    const now = Date.now();
    const current = desired();
    const scaleTo = autoscaleDecision(
      a,
      samples,
      { at: now, demand },
      {
        current,
        min: state.spec.min_replicas,
        max: state.spec.max_replicas,
        lastScaleAt,
        cooldownSeconds: input.autoscaleCooldownSeconds ?? 60,
      },
    );
    if (scaleTo !== undefined) {
      autoscaled = scaleTo;
      lastScaleAt = now;
      wake = true;
    } else autoscaled ??= current;
  }
  function statusNow(): DeploymentStatus {
    if (failedBecause !== undefined) return 'Failed';
    if (desired() === 0 && live.size === 0) return 'ScaledToZero';
    if (failures >= FAILED_AFTER) return 'Failed';
    if ([...live.values()].some((r) => r.revision < state.revision)) return 'Updating';
    return live.size === desired() ? 'Ready' : 'Scaling';
  }
  let lastStatus = '';
  async function project(details: string) {
    state.desired_replicas = desired();
    state.status = statusNow();
    if (state.status !== lastStatus) {
      upsertSearchAttributes(statusSearchAttributes(state.status));
      lastStatus = state.status;
    }
    setCurrentDetails(
      `**${state.status}**: ${live.size}/${desired()} replicas, revision ${state.revision}. ${details}`,
    );
    await control.recordDeployment({ deploymentId, state, version: ++version, generation });
  }

  setHandler(
    updateDeploymentUpdate,
    async (patch) => {
      const next = { ...state.spec, ...patch };
      if (changesReplicaTemplate(state.spec, next)) state.revision++;
      state.spec = next;
      failures = 0;
      retryAt = 0;
      wake = true;
      await project(`Change accepted (revision ${state.revision}).`);
    },
    {
      // The workflow's own spec is the truth: the API checked the patch against its read model,
      // which may not show a change accepted a moment ago.
      validator: (patch: Partial<DeploymentSpec>) => {
        if (deleting) throw new Error('The deployment is being deleted.');
        const next = { ...state.spec, ...patch };
        if (next.max_replicas < next.min_replicas) {
          throw ApplicationFailure.create({
            type: UPDATE_REJECTIONS.invalid,
            message: `max_replicas (${next.max_replicas}) must be at least min_replicas (${next.min_replicas}).`,
            details: ['max_replicas'],
            nonRetryable: true,
          });
        }
      },
    },
  );
  setHandler(setReplicaBoundsSignal, (bounds) => {
    if (deleting) return;
    state.spec = { ...state.spec, ...bounds };
    wake = true;
  });
  setHandler(deleteDeploymentUpdate, () => {
    deleting = true;
    wake = true;
  });

  /** Starts one replica of the current revision; true once it is healthy. */
  async function launch(): Promise<boolean> {
    const replicaId = `${state.spec.name}-${++seq}`;
    const revision = state.revision;
    const spec = state.spec;
    try {
      const launched = await launcher.launchReplica.executeWithOptions({ summary: `launch ${replicaId}` }, [
        { deploymentId, projectId, replicaId, revision, spec },
      ]);
      watch(replicaId, revision, launched.hostQueue, spec.image);
      return true;
    } catch (err) {
      if (isCancellation(err)) throw err;
      if (isScheduleToStart(err)) {
        await control.recordReplica({
          deploymentId,
          replicaId,
          revision,
          image: spec.image,
          status: 'Failed',
          reason: 'NoContainerHost',
          message: `No container host took the replica within ${input.containerWaitSeconds ?? 60}s: no worker serves queue "${CONTAINERS_TASK_QUEUE}" (run a control worker with GANTRY_CONTAINER_RUNTIME=process).`,
        });
      }
      failures++;
      retryAt = Date.now() + backoffSeconds(failures, input.maxRestartBackoffSeconds) * 1000;
      return false;
    }
  }

  /** Supervises a running replica on the host that holds it; its end (not asked for) means it died. */
  function watch(replicaId: string, revision: number, hostQueue: string, image: string): void {
    const supervisor = proxyActivities<ReplicaActivities>({
      taskQueue: hostQueue,
      // The host that launched it must still be there to watch it.
      scheduleToStartTimeout: '30 seconds',
      startToCloseTimeout: '3650 days',
      heartbeatTimeout: '15 seconds',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry: { maximumAttempts: 1 },
    });
    const scope = new CancellationScope();
    const done = scope
      .run(() =>
        supervisor.superviseReplica.executeWithOptions({ summary: `supervise ${replicaId}` }, [
          { deploymentId, replicaId, revision, image, graceSeconds: state.spec.termination_grace_period_seconds },
        ]),
      )
      .then(
        () => undefined,
        (err) => {
          if (isCancellation(err) && !live.has(replicaId)) return; // stopped on purpose
          if (
            isHeartbeatTimeout(err) &&
            live.has(replicaId) &&
            patched(PATCHES.reattachSupervisorAfterHeartbeatTimeout.id)
          ) {
            // The supervisor went quiet (a blocked or restarting host), not necessarily the replica: the host
            // keeps a replica whose supervisor detached for a while, so watch it again rather than start a
            // second one beside it. If it is gone, the new supervisor says so and it is replaced then.
            // (Before this patch it was replaced at once and the first one ran on, unowned.)
            watch(replicaId, revision, hostQueue, image);
            wake = true; // a round of the main loop, so a host that keeps timing out still continues as new
            return;
          }
          // It died: replace it after a backoff.
          live.delete(replicaId);
          failures++;
          retryAt = Date.now() + backoffSeconds(failures, input.maxRestartBackoffSeconds) * 1000;
          wake = true;
        },
      );
    live.set(replicaId, { revision, hostQueue, image, scope, done });
  }

  async function stopLeftBehind(r: CarriedDeployment['replicas'][number]): Promise<void> {
    const host = proxyActivities<ReplicaActivities>({
      taskQueue: r.hostQueue,
      scheduleToStartTimeout: '30 seconds',
      startToCloseTimeout: '5 minutes',
      retry: { maximumAttempts: 3 },
    });
    try {
      await host.stopReplica({
        deploymentId,
        replicaId: r.replicaId,
        revision: r.revision,
        image: r.image,
        graceSeconds: state.spec.termination_grace_period_seconds,
      });
    } catch (err) {
      // A host that is gone took its replicas with it (or stops them when their lease ends).
      if (!isScheduleToStart(err)) throw err;
      await control.recordReplica({
        deploymentId,
        replicaId: r.replicaId,
        revision: r.revision,
        image: r.image,
        status: 'Lost',
        reason: 'HostLost',
        message: `its host (${r.hostQueue}) did not answer within 30s`,
      });
    }
  }

  async function stop(replicaId: string): Promise<void> {
    const r = live.get(replicaId);
    if (!r) return;
    live.delete(replicaId);
    r.scope.cancel();
    await r.done;
  }

  async function reconcile(): Promise<void> {
    if (Date.now() < retryAt) return;
    const old = [...live.entries()].filter(([, r]) => r.revision < state.revision).map(([id]) => id);
    if (old.length) {
      // Rolling: a new replica first, then one old one goes.
      await project(`Rolling to revision ${state.revision}.`);
      if (await launch()) {
        failures = 0;
        await stop(old[0]);
      }
      wake = true;
      return;
    }
    while (live.size < desired() && !deleting) {
      await project(`Starting a replica (${live.size}/${desired()}).`);
      if (!(await launch())) break;
      if (failures < FAILED_AFTER) failures = 0;
    }
    while (live.size > desired()) {
      const newest = [...live.keys()].at(-1)!;
      await project(`Scaling down: stopping ${newest}.`);
      await stop(newest);
    }
  }

  if (input.deleteOnStart === undefined) {
    // A continued run takes over the replicas the previous one was watching.
    for (const r of input.carried?.replicas ?? []) watch(r.replicaId, r.revision, r.hostQueue, r.image);
  } else {
    // The run that watched these has ended: stop each on its host, if the host is still there.
    await project(`Deleting (${input.deleteOnStart}): stopping the replicas it left.`);
    await Promise.all((input.carried?.replicas ?? []).map((r) => stopLeftBehind(r)));
  }

  try {
    await serve();
  } catch (err) {
    if (err instanceof ContinueAsNew) throw err; // the hand-over to the next run, not a failure
    // Anything unexpected (an activity that gave up, a cancellation from the Temporal UI): nothing is
    // left running unowned. The replicas are stopped and Failed projected whatever happens to this
    // run, then it fails; DELETE of a Failed deployment starts a run that removes it.
    // (Before this patch the run failed with its replicas running and metered.)
    if (!patched(PATCHES.deploymentCompensateOnFailure.id)) throw err;
    failedBecause = failureMessage(err);
    await CancellationScope.nonCancellable(async () => {
      await Promise.all([...live.keys()].map((id) => stop(id)));
      await project(`Failed: ${failedBecause}. Every replica was stopped.`);
    });
    throw err;
  }
  await project('Deleting: stopping every replica.');
  await Promise.all([...live.keys()].map((id) => stop(id)));
  state.deleted = true;
  await project('Deleted.');
  await control.removeDeployment({ deploymentId });
  await condition(allHandlersFinished);
  return 'deleted';

  /** The main loop: observe, reconcile, project, sleep; until deleted (or continued as new). */
  async function serve(): Promise<void> {
    let rounds = 0;
    while (!deleting) {
      if (++rounds > (input.maxRoundsPerRun ?? 1000) || workflowInfo().continueAsNewSuggested) {
        await condition(allHandlersFinished);
        if (!deleting) {
          await project('Continuing as new; the replicas are handed over.');
        }
        // A message that arrived while projecting stays with this run: it would be lost at the hand-over.
        if (!deleting && allHandlersFinished()) {
          const carried: CarriedDeployment = {
            state,
            generation,
            seq,
            failures,
            autoscaled,
            lastScaleAt,
            replicas: [...live.entries()].map(([replicaId, r]) => ({
              replicaId,
              revision: r.revision,
              hostQueue: r.hostQueue,
              image: r.image,
            })),
          };
          await continueAsNew<typeof deployment>({ ...input, carried });
        }
      }
      if (activeAutoscaling(state.spec) && Date.now() >= nextObservation) {
        await observe();
        nextObservation = Date.now() + (input.autoscaleIntervalSeconds ?? 15) * 1000;
      }
      await reconcile();
      await project(
        live.size === desired()
          ? 'Steady.'
          : `Next attempt in ${Math.max(0, Math.round((retryAt - Date.now()) / 1000))}s.`,
      );
      // Wake for a retry, or for the autoscaler's next observation, whichever comes first.
      const until = Math.min(
        retryAt > Date.now() ? retryAt : Infinity,
        activeAutoscaling(state.spec) ? nextObservation : Infinity,
      );
      if (until !== Infinity) await condition(() => wake || deleting, Math.max(1, until - Date.now()));
      else await condition(() => wake || deleting);
      wake = false;
    }
  }
}
