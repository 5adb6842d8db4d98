/**
 * The behaviour of a container deployment's entity workflow (`deployment`, in
 * deployments.ts): its state and what it does with it: roll, scale and stop
 * replicas toward what is wanted, project its status, answer its messages.
 * Its parts, each built with what it depends on: the replicas this run
 * supervises (DeploymentReplicas, deployment-replicas.ts) and the autoscaler
 * (DeploymentAutoscaler, deployment-autoscaler.ts). The workflow function
 * wires the messages and a main loop that only asks the entity; decisions
 * that need no Temporal API are pure functions in shared/deployments.ts.
 * Everything here is workflow code: a change to the commands it issues goes
 * behind a patch (patches.ts).
 */
import { condition, patched, proxyActivities } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { failureMessage } from './failures';
import type { DeploymentControlActivities, ReplicaActivities } from '../activities/deployments';
import {
  CONTAINERS_TASK_QUEUE,
  changesReplicaTemplate,
  type CarriedDeployment,
  type DeploymentSpec,
  type DeploymentState,
  type DeploymentStatus,
  type DeploymentWorkflowInput,
} from '../shared/deployments';
import { UPDATE_REJECTIONS } from '../shared/update-rejections';
import { StatusProjection, refuse } from './entity-kit';
import { DeploymentAutoscaler } from './deployment-autoscaler';
import { DeploymentReplicas } from './deployment-replicas';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

const control = proxyActivities<DeploymentControlActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '500 milliseconds', maximumInterval: '10 seconds' },
});

const FAILED_AFTER = 3;

export class DeploymentEntity {
  readonly deploymentId: string;
  readonly projectId: string;
  readonly state: DeploymentState;
  /**
   * Projections are ordered by (generation, version): each run counts its own versions from 0.
   * A run carried by code that did not count generations is at least the second one.
   */
  readonly generation: number;
  private version = 0;
  /** Something changed that the main loop should act on before its next timer. */
  wake = false;
  /** A run started to clean up after a workflow that ended without deleting the deployment starts deleting. */
  deleting: boolean;
  /** Set when the run failed unexpectedly: the status its compensation projects. */
  failedBecause: string | undefined;
  /** The replicas this run supervises: launched, watched, replaced, stopped. */
  readonly replicas: DeploymentReplicas;
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
    this.deleting = input.deleteOnStart !== undefined;
    this.replicas = new DeploymentReplicas(input, this.state, control, this.launcher, () => {
      this.wake = true;
    });
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
    if (this.desired() === 0 && this.replicas.live.size === 0) return 'ScaledToZero';
    if (this.replicas.failures >= FAILED_AFTER) return 'Failed';
    if ([...this.replicas.live.values()].some((r) => r.revision < this.state.revision)) return 'Updating';
    return this.replicas.live.size === this.desired() ? 'Ready' : 'Scaling';
  }
  async project(details: string) {
    this.state.desired_replicas = this.desired();
    this.state.status = this.statusNow();
    this.status.show(
      this.state.status,
      `**${this.state.status}**: ${this.replicas.live.size}/${this.desired()} replicas, revision ${this.state.revision}. ${details}`,
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
    this.replicas.failures = 0;
    this.replicas.retryAt = 0;
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

  async reconcile(): Promise<void> {
    if (Date.now() < this.replicas.retryAt) return;
    this.replicas.retryOwed = false;
    const old = [...this.replicas.live.entries()].filter(([, r]) => r.revision < this.state.revision).map(([id]) => id);
    if (old.length) {
      // Rolling: a new replica first, then one old one goes.
      await this.project(`Rolling to revision ${this.state.revision}.`);
      if (await this.replicas.launch()) {
        this.replicas.failures = 0;
        await this.replicas.stop(old[0]);
      }
      this.wake = true;
      return;
    }
    while (this.replicas.live.size < this.desired() && !this.deleting) {
      await this.project(`Starting a replica (${this.replicas.live.size}/${this.desired()}).`);
      if (!(await this.replicas.launch())) break;
      if (this.replicas.failures < FAILED_AFTER) this.replicas.failures = 0;
    }
    while (this.replicas.live.size > this.desired()) {
      const newest = [...this.replicas.live.keys()].at(-1)!;
      await this.project(`Scaling down: stopping ${newest}.`);
      await this.replicas.stop(newest);
    }
  }

  /** What a round of the main loop projects after it reconciled. */
  roundSummary(): string {
    return this.replicas.live.size === this.desired()
      ? 'Steady.'
      : `Next attempt in ${Math.max(0, Math.round((this.replicas.retryAt - Date.now()) / 1000))}s.`;
  }

  /** Until a retry is due or the autoscaler looks next, whichever comes first, unless something wakes the loop. */
  async sleep(): Promise<void> {
    const until = Math.min(
      this.replicas.retryAt > Date.now() ? this.replicas.retryAt : Infinity,
      this.autoscaler.nextLook(),
    );
    if (until !== Infinity) await condition(() => this.wake || this.deleting, Math.max(1, until - Date.now()));
    else if (
      this.replicas.retryOwed &&
      !this.wake &&
      !this.deleting &&
      patched(PATCHES.retryFallenDueWhileProjecting.id)
    ) {
      // The retry a backoff deferred fell due while the round projected (a projection slower than the
      // backoff): it is due now. (Before this patch the loop waited for a message with no timer, and
      // a deployment whose launch failed once could stay short of replicas, or mid-rollout, for good.)
    } else await condition(() => this.wake || this.deleting);
    this.wake = false;
  }

  /** After an unexpected failure of the run: every replica stopped and Failed projected (the run then fails). */
  async compensate(err: unknown): Promise<void> {
    this.failedBecause = failureMessage(err);
    await this.replicas.stopAll();
    await this.project(`Failed: ${this.failedBecause}. Every replica was stopped.`);
  }

  /** The end of a delete: every replica stopped, Deleted projected, the rows removed. */
  async tearDown(): Promise<void> {
    await this.project('Deleting: stopping every replica.');
    await this.replicas.stopAll();
    this.state.deleted = true;
    await this.project('Deleted.');
    await this.remove();
  }

  /** What operators search by once the run ends deleted: GantryStatus Deleted, GantryPhase done. */
  ended(): void {
    this.status.end('Deleted', `**Deleted**: every replica stopped, revision ${this.state.revision}.`);
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
      seq: this.replicas.seq,
      failures: this.replicas.failures,
      autoscaled: this.autoscaler.autoscaled,
      lastScaleAt: this.autoscaler.lastScaleAt,
      replicas: [...this.replicas.live.entries()].map(([replicaId, r]) => ({
        replicaId,
        revision: r.revision,
        hostQueue: r.hostQueue,
        image: r.image,
      })),
    };
  }
}
