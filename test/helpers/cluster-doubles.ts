/**
 * Activity doubles for the cluster workflows in the workflow test tier: an
 * in-memory fleet behind the real activity signatures (ClusterActivities and
 * ClusterNodeTestActivities), recording every call so a test can assert what
 * the workflow decided (which nodes it cordoned, released, tested) and when,
 * in workflow time. Faults are programmed per activity.
 */
import { ApplicationFailure } from '@temporalio/common';
import type { AcceleratorActivities } from '../../activities/accelerator';
import type { ClusterActivities, ClusterNodeTestActivities } from '../../activities/clusters';
import type { ClusterSpec, ClusterState, ClusterWorkflowInput, FleetNode, Remediation } from '../../shared/clusters';
import type { DescribedNode, NodeRequest } from '../../providers/compute/compute';

type Activities = ClusterActivities & ClusterNodeTestActivities;
export type ActivityName = keyof Activities;

export interface Call {
  name: ActivityName;
  args: unknown;
  /** Wall time of the call (the test server's clock is the workflow's; this is when the test saw it). */
  at: number;
}

export class ClusterActivityDoubles {
  readonly calls: Call[] = [];
  readonly live = new Set<string>();
  readonly released = new Set<string>();
  readonly cordoned = new Set<string>();
  /** Nodes that fail to boot (once each: awaitNodes reports them failed). */
  readonly bootFailures = new Set<string>();
  /** Nodes that releaseClusterResources found still held (the sweep by cluster id). */
  readonly swept: string[] = [];
  private readonly clusterOf = new Map<string, string>();
  readonly remediations = new Map<string, Remediation>();
  states: ClusterState[] = [];
  /** Whether a host polls the GPU queue, as Temporal's poller list would say (the test knows its workers). */
  queuePolled: () => boolean = () => false;
  /** What each health check reports (healthy unless a test says otherwise). */
  healthy: (nodeId: string) => boolean = () => true;
  /** Called before an activity runs: throw to fail it, await to hold it. */
  private readonly hooks = new Map<ActivityName, (args: any) => unknown>();

  /** Runs `hook` before each call of `name` (replacing an earlier hook). */
  on(name: ActivityName, hook: ((args: any) => unknown) | undefined): void {
    if (hook) this.hooks.set(name, hook);
    else this.hooks.delete(name);
  }

  /** Makes every call of `name` fail (non-retryable when asked, so the workflow sees the failure at once). */
  fail(name: ActivityName, message: string, nonRetryable = true): void {
    this.on(name, () => {
      throw nonRetryable ? ApplicationFailure.nonRetryable(message, 'InjectedFault') : new Error(message);
    });
  }

  get latest(): ClusterState | undefined {
    return this.states.at(-1);
  }

  count(name: ActivityName): number {
    return this.calls.filter((c) => c.name === name).length;
  }

  private async enter(name: ActivityName, args: unknown): Promise<void> {
    this.calls.push({ name, args, at: Date.now() });
    await this.hooks.get(name)?.(args);
  }

  private node(req: NodeRequest, seq: number): FleetNode {
    const id = req.role === 'control-plane' ? `cp-${req.clusterId}` : `gpu-${req.clusterId}-${seq}`;
    return {
      node_id: id,
      instance_id: `i-${id}`,
      host_name: `host-${id}`,
      role: req.role,
      num_gpus: req.role === 'gpu-worker' ? 8 : 0,
      num_cpu_cores: 16,
      memory_gib: 64,
      networks: [],
      phase_transitions: [{ phase: 'NODE_PHASE_RUNNING', transition_time: new Date().toISOString() }],
    };
  }

  activities(): Activities {
    const self = this;
    const described = (ids: string[]): DescribedNode[] =>
      ids.map((id) => ({
        ...self.node(
          { clusterId: '', region: '', gpuType: 'H100_SXM', role: 'gpu-worker', preemptible: false, seqs: [] },
          0,
        ),
        node_id: id,
        instance_id: `i-${id}`,
        phase: self.bootFailures.delete(id) ? 'NODE_PHASE_FAILED' : 'NODE_PHASE_RUNNING',
        released: self.released.has(id),
      }));
    return {
      async projectClusterState(a) {
        await self.enter('projectClusterState', a);
        self.states.push(structuredClone(a.state));
      },
      async recordRemediation(r) {
        await self.enter('recordRemediation', r);
        self.remediations.set(r.id, { ...r });
      },
      async acceleratorQueuePolled(a) {
        await self.enter('acceleratorQueuePolled', a);
        return self.queuePolled();
      },
      async provisionNodes(req) {
        await self.enter('provisionNodes', req);
        const nodes = req.seqs.map((s) => self.node(req, s));
        for (const n of nodes) {
          self.live.add(n.node_id);
          self.clusterOf.set(n.node_id, req.clusterId);
        }
        return nodes;
      },
      async awaitNodes(a) {
        await self.enter('awaitNodes', a);
        return described(a.nodeIds);
      },
      async allocateSubnet(a) {
        await self.enter('allocateSubnet', a);
        return '10.0.0.0/24';
      },
      async issueKubeconfig(a) {
        await self.enter('issueKubeconfig', a);
      },
      async bindVolume(a) {
        await self.enter('bindVolume', a);
      },
      async installDrivers(a) {
        await self.enter('installDrivers', a);
      },
      async cordonNode(a) {
        await self.enter('cordonNode', a);
        self.cordoned.add(a.nodeId);
      },
      async restartNode(a) {
        await self.enter('restartNode', a);
      },
      async releaseNodes(a) {
        await self.enter('releaseNodes', a);
        for (const id of a.nodeIds) {
          self.live.delete(id);
          self.released.add(id);
        }
      },
      async preemptibleNodesAvailable(a) {
        await self.enter('preemptibleNodesAvailable', a);
        return null;
      },
      async observeWorkload(a) {
        await self.enter('observeWorkload', a);
        return { pending_gpu_requests: 0, idle_gpus: 0 };
      },
      async releaseClusterResources(a) {
        await self.enter('releaseClusterResources', a);
        for (const id of [...self.live]) {
          if (self.clusterOf.get(id) !== a.clusterId) continue;
          self.live.delete(id);
          self.released.add(id);
          self.swept.push(id);
        }
      },
      async provisionStandaloneVolume(a) {
        await self.enter('provisionStandaloneVolume', a);
        return 'available';
      },
      async runAcceptanceTests(a) {
        await self.enter('runAcceptanceTests', a);
        return { node_id: a.nodeId, passed: true, checks: [], simulated: true };
      },
      async runNcclTest(a) {
        await self.enter('runNcclTest', a);
        return { node_ids: a.nodeIds, passed: true, failing_node_ids: [], detail: 'ok', simulated: true };
      },
      async runHealthCheck(a) {
        await self.enter('runHealthCheck', a);
        const healthy = self.healthy(a.nodeId);
        return { node_id: a.nodeId, healthy, detail: healthy ? 'healthy' : 'Xid 79 (simulated)', simulated: true };
      },
    };
  }
}

/** A small on-demand Kubernetes cluster's workflow input, with the given settings. */
export function clusterInput(
  clusterId: string,
  opts: { gpus?: number; settings?: Partial<ClusterWorkflowInput['settings']>; spec?: Partial<ClusterSpec> } = {},
): ClusterWorkflowInput {
  const gpus = opts.gpus ?? 16;
  return {
    clusterId,
    projectId: 'proj-workflow-tier',
    spec: {
      cluster_name: clusterId,
      cluster_type: 'KUBERNETES',
      region: 'sim-local-1',
      gpu_type: 'H100_SXM',
      billing_type: 'ON_DEMAND',
      nvidia_version_id: 'v1',
      cuda_version: '12.8',
      nvidia_driver_version: '570',
      os_image: 'ubuntu-24.04',
      auto_scale: false,
      auto_remediation_enabled: true,
      add_ons: [],
      ...opts.spec,
    },
    counts: { num_gpus: gpus, num_reserved_gpus: 0, num_capacity_pool_gpus: 0, desired_preemptible_gpus: 0 },
    settings: {
      healthCheckIntervalSeconds: 60,
      autoscaleCooldownSeconds: 300,
      preemptionGraceSeconds: 300,
      maxTestRepairRounds: 2,
      maxRoundsPerRun: 500,
      gpuQueueWaitSeconds: 30,
      ...opts.settings,
    },
  };
}

/** The accelerator host's own activity (the probe of an unserved GPU queue), as a simulated host answers it. */
export const acceleratorHostDouble: Pick<AcceleratorActivities, 'describeAcceleratorHost'> = {
  async describeAcceleratorHost({ gpuType }) {
    return {
      hostname: 'workflow-tier-host',
      pid: process.pid,
      task_queue: `gpu.${gpuType}`,
      accelerator: 'simulated',
      gpu_type: gpuType,
      note: 'activity double of the workflow test tier',
    };
  },
};
