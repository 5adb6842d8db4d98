/**
 * What every part of a GPU cluster's entity workflow shares within one run:
 * the cluster's state (carried from run to run), its settings, and the
 * transient bookkeeping of this run (why it is being deleted, whether the main
 * loop should wake, notices it has yet to act on, background work beside it);
 * and the projection of its status. The parts (cluster-entity.ts) are built
 * with these as their dependencies. Workflow code: deterministic.
 */
import { isCancellation } from '@temporalio/workflow';
import { failureMessage } from './failures';
import { StatusProjection } from './entity-kit';
import { clusterControl as control } from './cluster-activities';
import {
  STATUS_OF_PHASE,
  initialState,
  type ClusterState,
  type ClusterWorkflowInput,
  type Remediation,
} from '../shared/clusters';
import { lifecycleEvent, nowIso, setPhase } from '../shared/cluster-state';

/** Thrown where bring-up or a wait can stop early because the cluster is being deleted. */
export class DeletionRequested extends Error {}

/** The cluster workflow's signature, as continueAsNew needs it (the workflow function lives in clusters.ts). */
export type ClusterWorkflow = (input: ClusterWorkflowInput) => Promise<'deleted'>;

/** What a remediation child reports to its cluster (signal `remediationProgress`). */
export interface RemediationProgress {
  remediation: Remediation;
  nodeId: string;
  reason: string;
  message: string;
}

export class ClusterRun {
  readonly state: ClusterState;
  readonly clusterId: string;
  readonly settings: ClusterWorkflowInput['settings'];
  readonly driver: { cuda: string; driver: string; os: string };
  readonly createdAt: Date;

  /** Why the cluster is being deleted, once it is. */
  deleteRequested: string | undefined;
  /** Something changed that the main loop should act on before its next timer. */
  wake = false;
  /** Preemption notices the main loop has yet to act on (during bring-up). */
  readonly notices: string[] = [];
  /** Background work beside the main loop (drains, remediations); see spawn. */
  readonly tasks = new Set<Promise<void>>();

  constructor(readonly input: ClusterWorkflowInput) {
    this.clusterId = input.clusterId;
    this.settings = input.settings;
    this.state = input.carried ?? initialState(input);
    const spec = this.state.spec;
    this.driver = { cuda: spec.cuda_version, driver: spec.nvidia_driver_version, os: spec.os_image };
    this.createdAt = new Date(input.carried?.phase_transitions[0]?.transition_time ?? nowIso());
    this.deleteRequested = input.deleteOnStart;
  }

  /**
   * Runs background work (a drain, a remediation) beside the main loop. Its
   * failure becomes a lifecycle event: an unhandled rejection would fail every
   * later workflow task, and the cluster would stop answering.
   */
  spawn(nodeId: string, what: string, work: () => Promise<void>) {
    const p: Promise<void> = work()
      .catch((err) => {
        if (isCancellation(err)) return;
        lifecycleEvent(
          this.state,
          nodeId,
          'BackgroundTaskFailed',
          `The ${what} of ${nodeId} failed: ${failureMessage(err)}`,
        );
      })
      .finally(() => {
        this.tasks.delete(p);
        this.wake = true;
      });
    this.tasks.add(p);
  }

  /** Thrown where bring-up or a wait can stop early because the cluster is being deleted. */
  abortIfDeleting(): void {
    if (this.deleteRequested) throw new DeletionRequested();
  }
}

/** The cluster's status as operators and the API see it: search attributes, current details, PostgreSQL. */
export class ClusterProjection {
  private readonly status = new StatusProjection();

  constructor(private readonly run: ClusterRun) {}

  async project(details?: string) {
    const state = this.run.state;
    state.version++;
    const status = STATUS_OF_PHASE[state.phase];
    this.status.show(
      status,
      `**${status}** (${state.phase})\n\n${details ?? ''}\n\nworkers: ${state.gpu_worker_nodes.length} live, ` +
        `${state.deleted_gpu_worker_nodes.length} deleted; open remediations: ${state.remediations.length}`,
    );
    await control.projectClusterState.executeWithOptions({ summary: `project ${state.phase}` }, [
      { clusterId: this.run.clusterId, state },
    ]);
  }

  /** The run's last word to operators (its status; the read model keeps the teardown's projection). */
  ended(status: 'Deleted' | 'Failed') {
    this.status.end(status, `**${status}**: ${this.run.state.deletion_reason ?? ''}`);
  }

  async phase(p: ClusterState['phase'], details?: string) {
    setPhase(this.run.state, p);
    await this.project(details);
  }
}
