/**
 * A deployment's autoscaler: it observes demand (a custom metric scraped from
 * the replicas, the gateway's request counts or mean duration, or the queue's
 * backlog) and keeps the number of replicas it wants, within the bounds; the
 * deployment (deployment-entity.ts) drives its replicas toward that number.
 * The decision itself is a pure function (shared/deployments.ts
 * autoscaleDecision). Workflow code: deterministic.
 */
import { isCancellation, patched, setCurrentDetails, type ActivityInterfaceFor } from '@temporalio/workflow';
import { failureMessage } from './failures';
import { PATCHES } from './patches';
import type { DeploymentControlActivities, ReplicaActivities } from '../activities/deployments';
import {
  activeAutoscaling,
  autoscaleDecision,
  type ActiveAutoscaling,
  type DeploymentState,
  type DeploymentWorkflowInput,
  type DemandSample,
} from '../shared/deployments';

export class DeploymentAutoscaler {
  /** The autoscaler's current wish (replicas), its recent observations, and when it last acted. */
  autoscaled: number | undefined;
  lastScaleAt: number;
  private nextObservation = 0;
  private readonly samples: DemandSample[] = [];
  private skippedObservations = 0;

  constructor(
    private readonly input: DeploymentWorkflowInput,
    private readonly state: DeploymentState,
    private readonly control: ActivityInterfaceFor<DeploymentControlActivities>,
    private readonly launcher: ActivityInterfaceFor<ReplicaActivities>,
    /** Tells the deployment's main loop that the wish changed. */
    private readonly wake: () => void,
  ) {
    this.autoscaled = input.carried?.autoscaled;
    this.lastScaleAt = input.carried?.lastScaleAt ?? 0;
  }

  /** One observation when autoscaling is on and its interval has passed; the next one is scheduled. */
  async observeIfDue(): Promise<void> {
    if (!activeAutoscaling(this.state.spec) || Date.now() < this.nextObservation) return;
    await this.observe();
    this.nextObservation = Date.now() + (this.input.autoscaleIntervalSeconds ?? 15) * 1000;
  }

  /** When the autoscaler looks next (Infinity when autoscaling is off). */
  nextLook(): number {
    return activeAutoscaling(this.state.spec) ? this.nextObservation : Infinity;
  }

  clamp(n: number): number {
    return Math.min(this.state.spec.max_replicas, Math.max(this.state.spec.min_replicas, n));
  }

  /** The replicas wanted now: the autoscaler's wish within the bounds, or min_replicas. */
  desired(): number {
    return activeAutoscaling(this.state.spec) && this.autoscaled !== undefined
      ? this.clamp(this.autoscaled)
      : this.state.spec.min_replicas;
  }

  /** The autoscaling metric's current total over the replicas, or the queue's backlog. */
  async measureDemand(a: ActiveAutoscaling): Promise<number> {
    if (a.metric === 'CustomMetric') {
      const scraped = await this.launcher.scrapeReplicaMetric.executeWithOptions(
        { summary: `scrape ${a.custom_metric_name}` },
        [{ deploymentId: this.input.deploymentId, metricName: a.custom_metric_name }],
      );
      return scraped.total;
    }
    if (a.metric === 'HTTPTotalRequests') {
      return this.control.httpRequests({
        deploymentId: this.input.deploymentId,
        windowSeconds: Math.max(1, a.time_interval_minutes ?? 1) * 60,
      });
    }
    if (a.metric === 'HTTPAvgRequestDuration' && patched(PATCHES.httpAvgRequestDuration.id)) {
      // A mean is not a total over replicas: as a demand, it is the replicas that would bring the mean
      // to `target` if load spread evenly (current * mean / target), times target. Nothing answered: idle.
      const mean = await this.control.httpMeanRequestMs({
        deploymentId: this.input.deploymentId,
        windowSeconds: Math.max(1, a.time_interval_minutes ?? 1) * 60,
      });
      return mean === null ? 0 : Math.max(1, this.desired()) * mean;
    }
    return this.control.queueBacklog({ deploymentId: this.input.deploymentId });
  }

  /**
   * One autoscaler observation: the metric's total over the replicas (or the
   * queue's backlog) against `target` per replica. Scale up as soon as the
   * latest observation asks for it; scale down (to min_replicas, zero allowed,
   * when idle) only when the whole time_interval_minutes window agrees and the
   * cool-down has passed.
   */
  async observe(): Promise<void> {
    const a = activeAutoscaling(this.state.spec)!;
    let demand: number;
    try {
      demand = await this.measureDemand(a);
    } catch (err) {
      // A metric that cannot be read skips this observation; the replicas stay as they are.
      // (Before this patch a failed scrape failed the whole deployment.)
      if (isCancellation(err) || !patched(PATCHES.skipFailedObservation.id)) throw err;
      this.skippedObservations++;
      setCurrentDetails(
        `**${this.state.status}**: autoscaler observation skipped (${this.skippedObservations} in a row): ${failureMessage(err)}`,
      );
      return;
    }
    this.skippedObservations = 0;
    const now = Date.now();
    const current = this.desired();
    const scaleTo = autoscaleDecision(
      a,
      this.samples,
      { at: now, demand },
      {
        current,
        min: this.state.spec.min_replicas,
        max: this.state.spec.max_replicas,
        lastScaleAt: this.lastScaleAt,
        cooldownSeconds: this.input.autoscaleCooldownSeconds ?? 60,
      },
    );
    if (scaleTo !== undefined) {
      this.autoscaled = scaleTo;
      this.lastScaleAt = now;
      this.wake();
    } else this.autoscaled ??= current;
  }
}
