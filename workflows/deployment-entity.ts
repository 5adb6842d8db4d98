/**
 * The behaviour of a container deployment's entity workflow (`deployment`, in
 * deployments.ts): its state, the replicas this run supervises, the
 * autoscaler's memory, and what it does with them: launch, supervise, roll,
 * scale and stop replicas, observe demand, project its status. The workflow
 * function wires the messages and the main loop to these methods; decisions
 * that need no Temporal API are pure functions in shared/deployments.ts.
 * Everything here is workflow code: a change to the commands it issues goes
 * behind a patch (patches.ts).
 */
import {
  ActivityCancellationType,
  condition,
  CancellationScope,
  isCancellation,
  proxyActivities,
  patched,
} from '@temporalio/workflow';
import { failureMessage, isFailureOfType, isHeartbeatTimeout, isScheduleToStart } from './failures';
import type { DeploymentControlActivities, ReplicaActivities } from '../activities/deployments';
import {
  CONTAINERS_TASK_QUEUE,
  HOST_RESTARTING,
  changesReplicaTemplate,
  type CarriedDeployment,
  type DeploymentSpec,
  type DeploymentState,
  type DeploymentStatus,
  type DeploymentWorkflowInput,
} from '../shared/deployments';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import { PATCHES } from './patches';
import { StatusProjection, refuse } from './entity-kit';
import { DeploymentAutoscaler } from './deployment-autoscaler';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

const control = proxyActivities<DeploymentControlActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});

/** A replica that dies is replaced after 1, 2, 4 ... seconds, up to the configured maximum. */
const backoffSeconds = (failures: number, max: number) => Math.min(max, 2 ** Math.max(0, failures - 1));
const FAILED_AFTER = 3;

interface LiveReplica {
  revision: number;
  hostQueue: string;
  image: string;
  scope: CancellationScope;
  done: Promise<void>;
}

export class DeploymentEntity {
  readonly deploymentId: string;
  readonly projectId: string;
  readonly state: DeploymentState;
  /** The replicas this run supervises, oldest first. */
  readonly live = new Map<string, LiveReplica>();
  /**
   * Projections are ordered by (generation, version): each run counts its own versions from 0.
   * A run carried by code that did not count generations is at least the second one.
   */
  readonly generation: number;
  private version = 0;
  /** The last replica number used (replica ids are `<deployment id>-<seq>`). */
  seq: number;
  /** Consecutive replica failures, and when the next launch may be tried. */
  failures: number;
  retryAt = 0;
  /** Something changed that the main loop should act on before its next timer. */
  wake = false;
  /** A run started to clean up after a workflow that ended without deleting the deployment starts deleting. */
  deleting: boolean;
  /** Set when the run failed unexpectedly: the status its compensation projects. */
  failedBecause: string | undefined;
  /** Observes demand and says how many replicas it wants (when autoscaling is on). */
  readonly autoscaler: DeploymentAutoscaler;
  private readonly status = new StatusProjection();
  private readonly launcher;

  constructor(readonly input: DeploymentWorkflowInput) {
    this.deploymentId = input.deploymentId;
    this.projectId = input.projectId;
    this.launcher = proxyActivities<ReplicaActivities>({
      taskQueue: CONTAINERS_TASK_QUEUE,
      // No container host at all is a failure the user should see, not a wait forever.
      scheduleToStartTimeout: `${input.containerWaitSeconds ?? 60} seconds`,
      startToCloseTimeout: '5 minutes',
      heartbeatTimeout: '30 seconds',
      retry: { maximumAttempts: 1 },
    });
    this.state = input.carried?.state ?? {
      revision: 1,
      spec: input.spec,
      desired_replicas: input.spec.min_replicas,
      status: 'Updating',
      deleted: false,
    };
    this.generation = input.carried ? (input.carried.generation ?? 0) + 1 : 0;
    this.seq = input.carried?.seq ?? 0;
    this.failures = input.carried?.failures ?? 0;
    this.deleting = input.deleteOnStart !== undefined;
    this.autoscaler = new DeploymentAutoscaler(input, this.state, control, this.launcher, () => {
      this.wake = true;
    });
  }

  /** The replicas wanted now: the autoscaler's wish within the bounds, or min_replicas. */
  desired(): number {
    return this.autoscaler.desired();
  }

  statusNow(): DeploymentStatus {
    if (this.failedBecause !== undefined) return 'Failed';
    if (this.desired() === 0 && this.live.size === 0) return 'ScaledToZero';
    if (this.failures >= FAILED_AFTER) return 'Failed';
    if ([...this.live.values()].some((r) => r.revision < this.state.revision)) return 'Updating';
    return this.live.size === this.desired() ? 'Ready' : 'Scaling';
  }
  async project(details: string) {
    this.state.desired_replicas = this.desired();
    this.state.status = this.statusNow();
    this.status.show(
      this.state.status,
      `**${this.state.status}**: ${this.live.size}/${this.desired()} replicas, revision ${this.state.revision}. ${details}`,
    );
    await control.recordDeployment({
      deploymentId: this.deploymentId,
      state: this.state,
      version: ++this.version,
      generation: this.generation,
    });
  }

  // ---- messages (the workflow function routes each to one of these) ----

  /** Update `updateDeployment`: a spec change; one that changes the replica template is a new revision. */
  async update(patch: Partial<DeploymentSpec>): Promise<void> {
    const next = { ...this.state.spec, ...patch };
    if (changesReplicaTemplate(this.state.spec, next)) this.state.revision++;
    this.state.spec = next;
    this.failures = 0;
    this.retryAt = 0;
    this.wake = true;
    await this.project(`Change accepted (revision ${this.state.revision}).`);
  }

  /**
   * The workflow's own spec is the truth: the API checked the patch against its read model,
   * which may not show a change accepted a moment ago.
   */
  validateUpdate(patch: Partial<DeploymentSpec>): void {
    if (this.deleting)
      throw refuse(UPDATE_REJECTIONS.conflict, 'The deployment is being deleted; it takes no changes.');
    const next = { ...this.state.spec, ...patch };
    if (next.max_replicas < next.min_replicas) {
      throw refuse(
        UPDATE_REJECTIONS.invalid,
        `max_replicas (${next.max_replicas}) must be at least min_replicas (${next.min_replicas}).`,
        { param: 'max_replicas' },
      );
    }
  }

  /** Signal `setReplicaBounds`: new bounds from a rollout moving capacity. */
  setReplicaBounds(bounds: { min_replicas: number; max_replicas: number }): void {
    if (this.deleting) return;
    this.state.spec = { ...this.state.spec, ...bounds };
    this.wake = true;
  }

  /** Update `deleteDeployment`. */
  requestDelete(): void {
    this.deleting = true;
    this.wake = true;
  }

  // ---- replicas ----

  /** Starts one replica of the current revision; true once it is healthy. */
  async launch(): Promise<boolean> {
    // A replica's id carries its deployment's id: hosts track replicas by id, and deployments of two
    // projects may share a name. (Before this patch it was `<name>-<n>`, and such replicas collided.)
    const owner = patched(PATCHES.replicaIdsPerDeployment.id) ? this.deploymentId : this.state.spec.name;
    const replicaId = `${owner}-${++this.seq}`;
    const revision = this.state.revision;
    const spec = this.state.spec;
    try {
      const launched = await this.launcher.launchReplica.executeWithOptions({ summary: `launch ${replicaId}` }, [
        { deploymentId: this.deploymentId, projectId: this.projectId, replicaId, revision, spec },
      ]);
      this.watch(replicaId, revision, launched.hostQueue, spec.image);
      return true;
    } catch (err) {
      if (isCancellation(err)) throw err;
      if (isScheduleToStart(err)) {
        await control.recordReplica({
          deploymentId: this.deploymentId,
          replicaId,
          revision,
          image: spec.image,
          status: 'Failed',
          reason: 'NoContainerHost',
          message: `No container host took the replica within ${this.input.containerWaitSeconds ?? 60}s: no worker serves queue "${CONTAINERS_TASK_QUEUE}" (run a control worker with GANTRY_CONTAINER_RUNTIME=podman).`,
        });
      }
      this.failures++;
      this.retryAt = Date.now() + backoffSeconds(this.failures, this.input.maxRestartBackoffSeconds) * 1000;
      return false;
    }
  }

  /** Supervises a running replica on the host that holds it; its end (not asked for) means it died. */
  watch(replicaId: string, revision: number, hostQueue: string, image: string): void {
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
          {
            deploymentId: this.deploymentId,
            replicaId,
            revision,
            image,
            graceSeconds: this.state.spec.termination_grace_period_seconds,
          },
        ]),
      )
      .then(
        () => undefined,
        (err) => {
          if (isCancellation(err) && !this.live.has(replicaId)) return; // stopped on purpose
          // Its host shut down to restart under the same name and left the replica running for the
          // next process: watch it again there. (Before this patch it was replaced, and the restarted
          // host stopped the first one when nobody re-attached.)
          if (
            isFailureOfType(err, HOST_RESTARTING) &&
            this.live.has(replicaId) &&
            patched(PATCHES.reattachWhenHostRestarts.id)
          ) {
            this.watch(replicaId, revision, hostQueue, image);
            this.wake = true;
            return;
          }
          if (
            isHeartbeatTimeout(err) &&
            this.live.has(replicaId) &&
            patched(PATCHES.reattachSupervisorAfterHeartbeatTimeout.id)
          ) {
            // The supervisor went quiet (a blocked or restarting host), not necessarily the replica: the host
            // keeps a replica whose supervisor detached for a while, so watch it again rather than start a
            // second one beside it. If it is gone, the new supervisor says so and it is replaced then.
            // (Before this patch it was replaced at once and the first one ran on, unowned.)
            this.watch(replicaId, revision, hostQueue, image);
            this.wake = true; // a round of the main loop, so a host that keeps timing out still continues as new
            return;
          }
          // It died: replace it after a backoff.
          this.live.delete(replicaId);
          this.failures++;
          this.retryAt = Date.now() + backoffSeconds(this.failures, this.input.maxRestartBackoffSeconds) * 1000;
          this.wake = true;
        },
      );
    this.live.set(replicaId, { revision, hostQueue, image, scope, done });
  }

  async stopLeftBehind(r: CarriedDeployment['replicas'][number]): Promise<void> {
    const host = proxyActivities<ReplicaActivities>({
      taskQueue: r.hostQueue,
      scheduleToStartTimeout: '30 seconds',
      startToCloseTimeout: '5 minutes',
      retry: { maximumAttempts: 3 },
    });
    try {
      await host.stopReplica({
        deploymentId: this.deploymentId,
        replicaId: r.replicaId,
        revision: r.revision,
        image: r.image,
        graceSeconds: this.state.spec.termination_grace_period_seconds,
      });
    } catch (err) {
      // A host that is gone took its replicas with it (or stops them when their lease ends).
      if (!isScheduleToStart(err)) throw err;
      await control.recordReplica({
        deploymentId: this.deploymentId,
        replicaId: r.replicaId,
        revision: r.revision,
        image: r.image,
        status: 'Lost',
        reason: 'HostLost',
        message: `its host (${r.hostQueue}) did not answer within 30s`,
      });
    }
  }

  async stop(replicaId: string): Promise<void> {
    const r = this.live.get(replicaId);
    if (!r) return;
    this.live.delete(replicaId);
    r.scope.cancel();
    await r.done;
  }

  async reconcile(): Promise<void> {
    if (Date.now() < this.retryAt) return;
    const old = [...this.live.entries()].filter(([, r]) => r.revision < this.state.revision).map(([id]) => id);
    if (old.length) {
      // Rolling: a new replica first, then one old one goes.
      await this.project(`Rolling to revision ${this.state.revision}.`);
      if (await this.launch()) {
        this.failures = 0;
        await this.stop(old[0]);
      }
      this.wake = true;
      return;
    }
    while (this.live.size < this.desired() && !this.deleting) {
      await this.project(`Starting a replica (${this.live.size}/${this.desired()}).`);
      if (!(await this.launch())) break;
      if (this.failures < FAILED_AFTER) this.failures = 0;
    }
    while (this.live.size > this.desired()) {
      const newest = [...this.live.keys()].at(-1)!;
      await this.project(`Scaling down: stopping ${newest}.`);
      await this.stop(newest);
    }
  }

  /** What a round of the main loop projects after it reconciled. */
  roundSummary(): string {
    return this.live.size === this.desired()
      ? 'Steady.'
      : `Next attempt in ${Math.max(0, Math.round((this.retryAt - Date.now()) / 1000))}s.`;
  }

  /** Until a retry is due or the autoscaler looks next, whichever comes first, unless something wakes the loop. */
  async sleep(): Promise<void> {
    const until = Math.min(this.retryAt > Date.now() ? this.retryAt : Infinity, this.autoscaler.nextLook());
    if (until !== Infinity) await condition(() => this.wake || this.deleting, Math.max(1, until - Date.now()));
    else await condition(() => this.wake || this.deleting);
    this.wake = false;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.live.keys()].map((id) => this.stop(id)));
  }

  /** After an unexpected failure of the run: every replica stopped and Failed projected (the run then fails). */
  async compensate(err: unknown): Promise<void> {
    this.failedBecause = failureMessage(err);
    await this.stopAll();
    await this.project(`Failed: ${this.failedBecause}. Every replica was stopped.`);
  }

  /** The end of a delete: every replica stopped, Deleted projected, the rows removed. */
  async tearDown(): Promise<void> {
    await this.project('Deleting: stopping every replica.');
    await this.stopAll();
    this.state.deleted = true;
    await this.project('Deleted.');
    await this.remove();
  }

  /** The deployment's rows are removed: the last step of a delete. */
  async remove(): Promise<void> {
    await control.removeDeployment({ deploymentId: this.deploymentId });
  }

  /** What the next run needs to take over: the state, the counters and the replicas it must re-attach to. */
  carried(): CarriedDeployment {
    return {
      state: this.state,
      generation: this.generation,
      seq: this.seq,
      failures: this.failures,
      autoscaled: this.autoscaler.autoscaled,
      lastScaleAt: this.autoscaler.lastScaleAt,
      replicas: [...this.live.entries()].map(([replicaId, r]) => ({
        replicaId,
        revision: r.revision,
        hostQueue: r.hostQueue,
        image: r.image,
      })),
    };
  }
}
