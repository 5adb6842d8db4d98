/**
 * The replicas one run of a deployment supervises (deployment-entity.ts):
 * launching one of the current revision, watching it on the host that holds
 * it (re-attaching when the host restarts or its supervisor goes quiet),
 * replacing one that died after a backoff, and stopping them with their
 * termination grace. Workflow code: a change to the commands it issues goes
 * behind a patch (patches.ts).
 */
import {
  ActivityCancellationType,
  CancellationScope,
  isCancellation,
  patched,
  proxyActivities,
  type ActivityInterfaceFor,
} from '@temporalio/workflow';
import { isFailureOfType, isHeartbeatTimeout, isScheduleToStart } from './failures';
import { PATCHES } from './patches';
import type { DeploymentControlActivities, ReplicaActivities } from '../activities/deployments';
import {
  CONTAINERS_TASK_QUEUE,
  HOST_RESTARTING,
  type CarriedDeployment,
  type DeploymentState,
  type DeploymentWorkflowInput,
} from '../shared/deployments';

/** A replica that dies is replaced after 1, 2, 4 ... seconds, up to the configured maximum. */
const backoffSeconds = (failures: number, max: number) => Math.min(max, 2 ** Math.max(0, failures - 1));

interface LiveReplica {
  revision: number;
  hostQueue: string;
  image: string;
  scope: CancellationScope;
  done: Promise<void>;
}

export class DeploymentReplicas {
  /** The replicas this run supervises, oldest first. */
  readonly live = new Map<string, LiveReplica>();
  /** The last replica number used (replica ids are `<deployment id>-<seq>`). */
  seq: number;
  /** Consecutive replica failures, and when the next launch may be tried. */
  failures: number;
  retryAt = 0;
  /**
   * A failure set `retryAt` and no round of the main loop has passed it since: a launch is owed at
   * `retryAt`, even when that time went by while the round was projecting (deployment-entity.ts sleep).
   */
  retryOwed = false;

  constructor(
    private readonly input: DeploymentWorkflowInput,
    private readonly state: DeploymentState,
    private readonly control: ActivityInterfaceFor<DeploymentControlActivities>,
    private readonly launcher: ActivityInterfaceFor<ReplicaActivities>,
    /** Tells the deployment's main loop that a replica changed. */
    private readonly wake: () => void,
  ) {
    this.seq = input.carried?.seq ?? 0;
    this.failures = input.carried?.failures ?? 0;
  }

  /** Starts one replica of the current revision; true once it is healthy. */
  async launch(): Promise<boolean> {
    // A replica's id carries its deployment's id: hosts track replicas by id, and deployments of two
    // projects may share a name. (Before this patch it was `<name>-<n>`, and such replicas collided.)
    const owner = patched(PATCHES.replicaIdsPerDeployment.id) ? this.input.deploymentId : this.state.spec.name;
    const replicaId = `${owner}-${++this.seq}`;
    const revision = this.state.revision;
    const spec = this.state.spec;
    try {
      const launched = await this.launcher.launchReplica.executeWithOptions({ summary: `launch ${replicaId}` }, [
        { deploymentId: this.input.deploymentId, projectId: this.input.projectId, replicaId, revision, spec },
      ]);
      this.watch(replicaId, revision, launched.hostQueue, spec.image);
      return true;
    } catch (err) {
      if (isCancellation(err)) throw err;
      if (isScheduleToStart(err)) {
        await this.control.recordReplica({
          deploymentId: this.input.deploymentId,
          replicaId,
          revision,
          image: spec.image,
          status: 'Failed',
          reason: 'NoContainerHost',
          message: `No container host took the replica within ${this.input.containerWaitSeconds ?? 60}s: no worker serves queue "${CONTAINERS_TASK_QUEUE}" (run a control worker with GANTRY_CONTAINER_RUNTIME=podman).`,
        });
      }
      this.backOff();
      return false;
    }
  }

  /** One more consecutive failure: the next launch waits out a longer backoff. */
  private backOff(): void {
    this.failures++;
    this.retryAt = Date.now() + backoffSeconds(this.failures, this.input.maxRestartBackoffSeconds) * 1000;
    this.retryOwed = true;
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
            deploymentId: this.input.deploymentId,
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
            this.wake();
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
            this.wake(); // a round of the main loop, so a host that keeps timing out still continues as new
            return;
          }
          // It died: replace it after a backoff.
          this.live.delete(replicaId);
          this.backOff();
          this.wake();
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
        deploymentId: this.input.deploymentId,
        replicaId: r.replicaId,
        revision: r.revision,
        image: r.image,
        graceSeconds: this.state.spec.termination_grace_period_seconds,
      });
    } catch (err) {
      // A host that is gone took its replicas with it (or stops them when their lease ends).
      if (!isScheduleToStart(err)) throw err;
      await this.control.recordReplica({
        deploymentId: this.input.deploymentId,
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

  async stopAll(): Promise<void> {
    await Promise.all([...this.live.keys()].map((id) => this.stop(id)));
  }
}
