/**
 * A GPU cluster's entity (`cluster`, in clusters.ts): its parts, each one
 * concern built with what it depends on, and the questions the workflow's main
 * loop asks. The workflow function wires the messages to `handlers` and runs
 * the loop; it reads and writes no field of the parts. The decisions that
 * need no Temporal API are pure functions in shared/cluster-state.ts.
 *
 *   ClusterRun, ClusterProjection  the state, this run's bookkeeping, the status (cluster-run.ts)
 *   GpuWorkers                     waiting for a worker on the GPU queue (cluster-gpu-workers.ts)
 *   ClusterNodes                   provisioning, acceptance tests, remediations (cluster-nodes.ts)
 *   ClusterBringUp                 bring-up phase by phase (cluster-bring-up.ts)
 *   RunningCluster                 scaling, drains, health, autoscaling, teardown (cluster-running.ts)
 *   ClusterHandlers                the Updates and Signals (cluster-handlers.ts)
 *
 * Everything here is workflow code: deterministic, and a change to the
 * commands it issues goes behind a patch (patches.ts).
 */
import { allHandlersFinished, condition, workflowInfo } from '@temporalio/workflow';
import { failureMessage } from './failures';
import { clusterExpiry } from '../shared/cluster-rules';
import type { ClusterState, ClusterWorkflowInput } from '../shared/clusters';
import { ClusterProjection, ClusterRun } from './cluster-run';
import { GpuWorkers } from './cluster-gpu-workers';
import { ClusterNodes } from './cluster-nodes';
import { ClusterBringUp } from './cluster-bring-up';
import { RunningCluster } from './cluster-running';
import { ClusterHandlers } from './cluster-handlers';

export { DeletionRequested, type RemediationProgress } from './cluster-run';

export class ClusterEntity {
  /** The cluster's state: what the query answers and what a new run carries on. */
  readonly state: ClusterState;
  /** Where the workflow function routes each Update and Signal. */
  readonly handlers: ClusterHandlers;
  private readonly run: ClusterRun;
  private readonly status: ClusterProjection;
  private readonly bringUpPhases: ClusterBringUp;
  private readonly cluster: RunningCluster;

  constructor(input: ClusterWorkflowInput) {
    this.run = new ClusterRun(input);
    this.state = this.run.state;
    this.status = new ClusterProjection(this.run);
    const workers = new GpuWorkers(this.run, this.status);
    const nodes = new ClusterNodes(this.run, this.status, workers);
    this.bringUpPhases = new ClusterBringUp(this.run, this.status, workers, nodes);
    this.cluster = new RunningCluster(this.run, this.status, workers, nodes);
    this.handlers = new ClusterHandlers(this.run, this.status, nodes, this.cluster);
  }

  /** Why the cluster is being deleted, once it is. */
  get deleteRequested(): string | undefined {
    return this.run.deleteRequested;
  }

  project(details?: string): Promise<void> {
    return this.status.project(details);
  }

  /** The whole bring-up of a new cluster. */
  bringUp(): Promise<void> {
    return this.bringUpPhases.bringUp();
  }

  /** The rest of a bring-up whose previous run handed over while its tests waited for a GPU worker. */
  async resumeBringUp(): Promise<void> {
    await this.bringUpPhases.bringUpTests();
    await this.bringUpPhases.finishBringUp();
  }

  scheduleHealthCheck(): void {
    this.cluster.scheduleHealthCheck();
  }

  /** When the reservation or the scheduled capacity window ends, if it does. */
  expiry(): Date | undefined {
    return clusterExpiry(this.state.spec, this.run.createdAt);
  }

  /** Whether `expiry` has come; if so the cluster is to be deleted, and says why. */
  deleteIfExpired(expiry: Date | undefined): boolean {
    if (!expiry || Date.now() < expiry.getTime()) return false;
    this.run.deleteRequested =
      this.state.spec.billing_type === 'RESERVED' ? 'the reservation ended' : 'the scheduled capacity window ended';
    return true;
  }

  reconcile(): Promise<void> {
    return this.cluster.reconcile();
  }

  healthCheckDue(): boolean {
    return this.cluster.healthCheckDue();
  }

  healthRound(): Promise<void> {
    return this.cluster.healthRound();
  }

  /** Whether this run has done its share (or Temporal suggests a new one) and no background work runs. */
  mayHandOver(rounds: number): boolean {
    return (
      (rounds >= this.run.settings.maxRoundsPerRun || workflowInfo().continueAsNewSuggested) &&
      this.run.tasks.size === 0
    );
  }

  /** Nothing that the state does not carry is pending: no wake, notice, delete or running handler. */
  quiet(): boolean {
    return (
      !this.run.wake && this.run.notices.length === 0 && this.run.deleteRequested === undefined && allHandlersFinished()
    );
  }

  /** Sleeps until the next health round or the expiry, unless something wakes the loop first. */
  async sleep(expiry: Date | undefined): Promise<void> {
    const until = Math.min(this.cluster.nextHealthCheck, expiry ? expiry.getTime() : Infinity) - Date.now();
    await condition(() => this.run.wake || this.run.deleteRequested !== undefined, Math.max(1, until));
    this.run.wake = false;
  }

  /** The cluster's end: nodes released, meters closed, the deletion projected. */
  tearDown(): Promise<void> {
    return this.cluster.tearDown(this.run.deleteRequested!);
  }

  /** What operators search by once the run ends: Deleted (GantryPhase done) or Failed (failed). */
  ended(status: 'Deleted' | 'Failed'): void {
    this.status.ended(status);
  }

  /** The same after an unexpected failure of the run, which becomes the reason unless a delete came first. */
  tearDownAfterFailure(err: unknown): Promise<void> {
    this.run.deleteRequested ??= `the cluster workflow failed: ${failureMessage(err)}`;
    return this.cluster.tearDown(this.run.deleteRequested);
  }
}
