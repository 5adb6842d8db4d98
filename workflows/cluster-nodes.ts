/**
 * A cluster's worker nodes: provisioning and booting them, their acceptance
 * test, and their repair through remediations (child workflows, in
 * node-remediation.ts) whose outcome is applied to the nodes. Used by bring-up
 * and by the running cluster alike. Workflow code: deterministic.
 */
import {
  CancellationScope,
  isCancellation,
  ParentClosePolicy,
  patched,
  startChild,
  workflowInfo,
} from '@temporalio/workflow';
import { failureMessage } from './failures';
import { PATCHES } from './patches';
import { clusterControl as control, clusterWaits as waits, NODE_POLL_MS } from './cluster-activities';
import { remediationWorkflowId, type ClusterNode, type NodeCapacity, type Remediation } from '../shared/clusters';
import {
  SA_PHASE,
  SA_PROJECT_ID,
  SA_RESOURCE_ID,
  SA_RESOURCE_TYPE,
  SA_STATUS,
  gantryPhaseOf,
} from '../shared/search-attributes';
import {
  findWorker,
  lifecycleEvent,
  mergePhases,
  newNode,
  nowIso,
  refreshPreemptibleCount,
  retireWorker,
} from '../shared/cluster-state';
import { nodeRemediation, type RemediationOutcome } from './node-remediation';
import { nodeTestUnavailable, type GpuWorkers } from './cluster-gpu-workers';
import type { ClusterProjection, ClusterRun } from './cluster-run';

const remediationSearchAttributes = (r: Remediation, projectId: string) => ({
  [SA_PROJECT_ID.name]: [projectId],
  [SA_RESOURCE_TYPE.name]: ['remediation'],
  [SA_RESOURCE_ID.name]: [r.id],
  [SA_STATUS.name]: [r.state],
  [SA_PHASE.name]: [gantryPhaseOf(r.state)],
});

export class ClusterNodes {
  /** Remediation ids whose child is running. */
  readonly running = new Set<string>();
  /** The scopes that run remediation children, with their ends. */
  readonly remediationScopes = new Map<string, { scope: CancellationScope; done: Promise<unknown> }>();

  constructor(
    private readonly run: ClusterRun,
    private readonly status: ClusterProjection,
    private readonly workers: GpuWorkers,
  ) {}

  /** Provisions worker nodes, waits for them to boot; failed boots are retired and reported. */
  async launchWorkers(capacities: NodeCapacity[]): Promise<ClusterNode[]> {
    if (!capacities.length) return [];
    const preemptible = capacities[0] === 'preemptible';
    const seqs = capacities.map(() => ++this.run.state.node_seq);
    const created = await control.provisionNodes.executeWithOptions(
      { summary: `provision ${seqs.length} ${preemptible ? 'preemptible ' : ''}worker(s)` },
      [
        {
          clusterId: this.run.clusterId,
          region: this.run.state.spec.region,
          gpuType: this.run.state.spec.gpu_type,
          role: 'gpu-worker',
          preemptible,
          seqs,
        },
      ],
    );
    const nodes = created.map((f, i) => newNode(f, capacities[i], this.run.state.spec.auto_remediation_enabled));
    this.run.state.gpu_worker_nodes.push(...nodes);
    await this.status.project(`Booting ${nodes.map((n) => n.node_id).join(', ')}.`);
    const seen = await waits.awaitNodes.executeWithOptions({ summary: `await ${nodes.length} worker(s)` }, [
      { nodeIds: nodes.map((n) => n.node_id), pollMs: NODE_POLL_MS },
    ]);
    const booted: ClusterNode[] = [];
    for (const node of nodes) {
      const d = seen.find((x) => x.node_id === node.node_id)!;
      mergePhases(node, d.phase_transitions);
      if (d.phase === 'NODE_PHASE_RUNNING') {
        node.status = 'Bootstrapped';
        booted.push(node);
      } else {
        lifecycleEvent(
          this.run.state,
          node.node_id,
          'NodeBootFailed',
          `Node ${node.node_id} failed to boot; it is released.`,
        );
        await control.releaseNodes({ nodeIds: [node.node_id] });
        retireWorker(this.run.state, node.node_id);
      }
    }
    await this.status.project();
    return booted;
  }

  /** Workers with drivers and a passing acceptance test; the others are retired. */
  async qualifyWorkers(nodes: ClusterNode[]): Promise<ClusterNode[]> {
    if (!nodes.length) return [];
    await control.installDrivers.executeWithOptions({ summary: 'install drivers' }, [
      { nodeIds: nodes.map((n) => n.node_id), driver: this.run.driver },
    ]);
    const reports = await Promise.all(nodes.map((n) => this.acceptance(n)));
    const passed: ClusterNode[] = [];
    for (const [i, node] of nodes.entries()) {
      if (reports[i]) {
        node.status = 'Ready';
        passed.push(node);
      } else {
        await control.releaseNodes({ nodeIds: [node.node_id] });
        retireWorker(this.run.state, node.node_id);
      }
    }
    return passed;
  }

  async acceptance(node: ClusterNode): Promise<boolean> {
    const params = this.run.state.spec.acceptance_tests_params ?? {};
    if (params.enabled === false) return true;
    const report = await this.workers
      .onAccelerator(node.node_id, 'acceptance test', (attempt) =>
        this.workers.gpu.runAcceptanceTests.executeWithOptions({ summary: `acceptance ${node.node_id}`, ...attempt }, [
          { clusterId: this.run.clusterId, nodeId: node.node_id, params },
        ]),
      )
      .catch((err) => nodeTestUnavailable(err));
    if (!report) {
      node.status = 'Failed';
      lifecycleEvent(
        this.run.state,
        node.node_id,
        'AcceptanceTestUnavailable',
        'The acceptance test could not run; the node is not accepted.',
      );
      return false;
    }
    if (!report.passed) {
      const failed = report.checks.filter((c) => !c.passed).map((c) => `${c.name}: ${c.detail}`);
      node.status = 'Failed';
      lifecycleEvent(this.run.state, node.node_id, 'AcceptanceTestFailed', failed.join('; '));
    }
    return report.passed;
  }

  /** Runs a remediation as a child workflow and applies its outcome to the nodes. */
  async remediate(r: Remediation): Promise<RemediationOutcome> {
    const node = findWorker(this.run.state, r.instance_id);
    this.running.add(r.id);
    const replaces = r.mode === 'REMEDIATION_MODE_VM_ONLY' || r.mode === 'REMEDIATION_MODE_HOST_AWARE';
    // Its own scope, so that deleting the cluster can cancel it (the child then releases what it provisioned).
    const scope = new CancellationScope();
    let outcome: RemediationOutcome;
    try {
      const done = scope.run(async () => {
        const child = await startChild(nodeRemediation, {
          workflowId: remediationWorkflowId(this.run.clusterId, r.id),
          parentClosePolicy: ParentClosePolicy.TERMINATE,
          staticSummary: `${r.mode} of ${node?.node_id ?? r.instance_id} (${r.trigger})`,
          searchAttributes: remediationSearchAttributes(r, this.run.input.projectId),
          args: [
            {
              clusterId: this.run.clusterId,
              parentWorkflowId: workflowInfo().workflowId,
              remediation: r,
              node: node!,
              region: this.run.state.spec.region,
              gpuType: this.run.state.spec.gpu_type,
              replacementSeq: replaces ? ++this.run.state.node_seq : undefined,
              driver: this.run.driver,
              acceptance: this.run.state.spec.acceptance_tests_params ?? {},
            },
          ],
        });
        return child.result();
      });
      this.remediationScopes.set(r.id, { scope, done });
      outcome = await done;
    } catch (err) {
      // The child failed, was terminated or cancelled, or its id is taken: the remediation ends, the cluster goes on.
      // (Before this patch such a failure went unhandled.)
      if (!patched(PATCHES.remediationChildFailureIsState.id)) throw err;
      const now = nowIso();
      const cancelled = isCancellation(err) || scope.consideredCancelled;
      const message = cancelled
        ? `cancelled: ${this.run.deleteRequested ? `cluster deleted: ${this.run.deleteRequested}` : 'the cluster stopped it'}`
        : failureMessage(err);
      outcome = {
        remediation: {
          ...r,
          state: cancelled ? 'CANCELLED' : 'FAILED',
          update_time: now,
          end_time: now,
          error_message: message,
        },
      };
      await CancellationScope.nonCancellable(() => control.recordRemediation(outcome.remediation));
      lifecycleEvent(
        this.run.state,
        node?.node_id ?? r.instance_id,
        cancelled ? 'RemediationCancelled' : 'RemediationFailed',
        `${r.mode} of ${node?.node_id ?? r.instance_id} ${cancelled ? 'was cancelled' : 'failed'}: ${message}`,
      );
    } finally {
      this.remediationScopes.delete(r.id);
    }
    this.running.delete(r.id);
    const i = this.run.state.remediations.findIndex((x) => x.id === r.id);
    if (i >= 0) this.run.state.remediations.splice(i, 1);
    const old = findWorker(this.run.state, r.instance_id);
    if (outcome.remediation.state === 'SUCCEEDED') {
      this.run.state.remediation_declined = this.run.state.remediation_declined.filter((id) => id !== old?.node_id);
      if (outcome.replacement && old) {
        const fresh = newNode(outcome.replacement, old.capacity, old.auto_remediation_enabled);
        fresh.status = 'Ready';
        retireWorker(this.run.state, old.node_id);
        this.run.state.gpu_worker_nodes.push(fresh);
      } else if (outcome.evicted && old) {
        retireWorker(this.run.state, old.node_id);
      } else if (old) {
        mergePhases(old, outcome.phases ?? []);
        old.status = 'Ready';
      }
    } else if (old) {
      old.status = 'Unhealthy';
    }
    refreshPreemptibleCount(this.run.state);
    return outcome;
  }

  /**
   * Replaces failing nodes through remediations (automated; the bring-up
   * approves them itself). Returns the nodes whose repair failed.
   */
  async repairAll(nodes: ClusterNode[], why: string): Promise<ClusterNode[]> {
    const outcomes = await Promise.all(
      nodes.map(async (node) => {
        const now = nowIso();
        const r: Remediation = {
          id: `rem-${node.node_id}-${this.run.state.version}`,
          cluster_id: this.run.clusterId,
          instance_id: node.instance_id,
          instance_name: node.node_id,
          mode: 'REMEDIATION_MODE_VM_ONLY',
          state: 'PENDING',
          trigger: 'REMEDIATION_TRIGGER_AUTOMATED',
          reason: `${why} during provisioning`,
          requested_by: 'gantry',
          create_time: now,
          update_time: now,
        };
        this.run.state.remediations.push(r);
        await control.recordRemediation(r);
        return this.remediate(r);
      }),
    );
    await this.status.project();
    return nodes.filter((_, i) => outcomes[i].remediation.state !== 'SUCCEEDED');
  }
}
