/**
 * Pure helpers over a cluster's state (shared/clusters.ts ClusterState), used
 * by the cluster workflow: phases, lifecycle events, which nodes are live,
 * where a new node's GPUs come from. No activities, no timers: each function
 * only reads or changes the state it is given, with workflow time.
 */
import {
  GPUS_PER_NODE,
  MAX_DELETED_NODES,
  MAX_PHASE_TRANSITIONS,
  MAX_LIFECYCLE_EVENTS,
  MAX_NODE_PHASE_TRANSITIONS,
  type ClusterNode,
  type ClusterPhase,
  type ClusterState,
  type FleetNode,
  type NodeCapacity,
  type PhaseTransition,
  type Remediation,
  type NodePhase,
  nowIso,
} from './clusters';

export { nowIso } from './clusters';

export function setPhase(state: ClusterState, phase: ClusterPhase): boolean {
  if (state.phase === phase) return false;
  state.phase = phase;
  state.phase_transitions.push({ phase, transition_time: nowIso() });
  if (state.phase_transitions.length > MAX_PHASE_TRANSITIONS) state.phase_transitions.splice(1, 1);
  return true;
}

export function lifecycleEvent(state: ClusterState, nodeId: string, reason: string, message: string): void {
  state.node_lifecycle_events.push({ node_id: nodeId, reason, message, timestamp: nowIso() });
  if (state.node_lifecycle_events.length > MAX_LIFECYCLE_EVENTS) {
    state.node_lifecycle_events.splice(0, state.node_lifecycle_events.length - MAX_LIFECYCLE_EVENTS);
  }
}

export function newNode(f: FleetNode, capacity: NodeCapacity, autoRemediation: boolean): ClusterNode {
  return { ...f, status: 'Provisioning', capacity, auto_remediation_enabled: autoRemediation };
}

/**
 * Appends the phases a node reached since the last time we looked (a restart starts a new boot),
 * keeping its first phase and the latest ones: a node rebooted every day would otherwise carry a
 * month of boots through every continue-as-new.
 */
export function mergePhases(node: ClusterNode, seen: Array<PhaseTransition<NodePhase>>): void {
  const last = node.phase_transitions[node.phase_transitions.length - 1];
  const fresh = last ? seen.filter((t) => t.transition_time > last.transition_time) : seen;
  node.phase_transitions.push(...fresh);
  const over = node.phase_transitions.length - MAX_NODE_PHASE_TRANSITIONS;
  if (over > 0) node.phase_transitions.splice(1, over);
}

export const isPreemptible = (n: ClusterNode) => n.capacity === 'preemptible';
/** Live regular (non-preemptible) workers: what `num_gpus` and the autoscaler count. */
export const regularWorkers = (s: ClusterState) => s.gpu_worker_nodes.filter((n) => !isPreemptible(n));
export const preemptibleWorkers = (s: ClusterState) =>
  s.gpu_worker_nodes.filter((n) => isPreemptible(n) && !s.draining[n.node_id]);

export function findWorker(s: ClusterState, idOrInstance: string): ClusterNode | undefined {
  return s.gpu_worker_nodes.find((n) => n.node_id === idOrInstance || n.instance_id === idOrInstance);
}

/** Takes a worker out of the live data plane; it stays listed in deleted_gpu_worker_nodes. */
export function retireWorker(s: ClusterState, nodeId: string): ClusterNode | undefined {
  const i = s.gpu_worker_nodes.findIndex((n) => n.node_id === nodeId);
  if (i < 0) return undefined;
  const [node] = s.gpu_worker_nodes.splice(i, 1);
  node.status = 'Deleted';
  node.deleted_at = nowIso();
  delete s.draining[nodeId];
  // A declined remediation is about a live node; one that is gone is not proposed again anyway.
  s.remediation_declined = s.remediation_declined.filter((id) => id !== nodeId);
  s.deleted_gpu_worker_nodes.push(node);
  if (s.deleted_gpu_worker_nodes.length > MAX_DELETED_NODES) s.deleted_gpu_worker_nodes.shift();
  refreshPreemptibleCount(s);
  return node;
}

export function refreshPreemptibleCount(s: ClusterState): void {
  s.allocated_preemptible_gpus = preemptibleWorkers(s).length * GPUS_PER_NODE;
}

/** Where new regular nodes' GPUs come from: reserved first, then the capacity pool, then on demand. */
export function capacitiesForNewNodes(s: ClusterState, count: number): NodeCapacity[] {
  const have = (c: NodeCapacity) => regularWorkers(s).filter((n) => n.capacity === c).length;
  let reserved = have('reserved');
  let pool = have('capacity_pool');
  const out: NodeCapacity[] = [];
  for (let i = 0; i < count; i++) {
    if (reserved * GPUS_PER_NODE < s.counts.num_reserved_gpus) {
      out.push('reserved');
      reserved++;
    } else if (pool * GPUS_PER_NODE < s.counts.num_capacity_pool_gpus) {
      out.push('capacity_pool');
      pool++;
    } else out.push('on_demand');
  }
  return out;
}

/** Regular workers the cluster should have now: num_gpus, or more while the autoscaler asks for more. */
export function targetRegularNodes(s: ClusterState): number {
  const gpus = s.spec.auto_scale ? Math.max(s.counts.num_gpus, s.autoscale_target_gpus) : s.counts.num_gpus;
  return gpus / GPUS_PER_NODE;
}

/** Ready or Degraded, once provisioning is over: Degraded while a node is unhealthy or capacity is missing. */
export function settledPhase(s: ClusterState): ClusterPhase {
  // A node being reclaimed after a preemption notice is expected churn, not a degradation.
  const unhealthy = s.gpu_worker_nodes.some((n) => n.status !== 'Ready' && !s.draining[n.node_id]);
  const short = regularWorkers(s).length < s.counts.num_gpus / GPUS_PER_NODE;
  return unhealthy || short ? 'CLUSTER_PHASE_DEGRADED' : 'CLUSTER_PHASE_READY';
}

/** Whether the autoscaler may act again: the last scale is at least `cooldownSeconds` old. */
export function autoscaleCooledDown(s: ClusterState, nowMs: number, cooldownSeconds: number): boolean {
  return !s.last_scale_at || nowMs - Date.parse(s.last_scale_at) >= cooldownSeconds * 1000;
}

/**
 * The GPUs the autoscaler asks for after one look at the workload: whole nodes for the pending
 * GPU requests (up to auto_scale_max_gpus), or whole idle nodes released (down to num_gpus);
 * otherwise its current wish stands.
 */
export function autoscaleTargetGpus(
  s: ClusterState,
  workload: { pending_gpu_requests: number; idle_gpus: number },
): number {
  const liveGpus = regularWorkers(s).length * GPUS_PER_NODE;
  if (workload.pending_gpu_requests > 0) {
    const add = Math.ceil(workload.pending_gpu_requests / GPUS_PER_NODE) * GPUS_PER_NODE;
    return Math.min(s.spec.auto_scale_max_gpus ?? liveGpus, liveGpus + add);
  }
  if (workload.idle_gpus >= GPUS_PER_NODE) {
    const remove = Math.floor(workload.idle_gpus / GPUS_PER_NODE) * GPUS_PER_NODE;
    return Math.max(s.counts.num_gpus, liveGpus - remove);
  }
  return s.autoscale_target_gpus;
}

/** The regular workers a scale-down to `target` nodes releases: the newest first, never one under remediation. */
export function scaleDownVictims(s: ClusterState, target: number): ClusterNode[] {
  const live = regularWorkers(s);
  if (live.length <= target) return [];
  const busy = new Set(s.remediations.map((r) => r.instance_id));
  return live
    .filter((n) => !busy.has(n.instance_id))
    .slice(-(live.length - target))
    .reverse();
}

/**
 * What one health check says about a node, applied to the state: a check that could not run
 * makes the node Unknown; a healthy answer brings an Unhealthy or Unknown node back (and lets it
 * be remediated again later); a failed one makes it Unhealthy and, unless a remediation of it was
 * declined, asks for a reboot: started at once with auto-remediation, or waiting for approval.
 * `changed` says whether the cluster's phase should be settled again; the caller records the
 * remediation it returns.
 */
export function applyHealthReport(
  s: ClusterState,
  clusterId: string,
  node: ClusterNode,
  report: { healthy: boolean; detail: string } | undefined,
): { changed: boolean; remediation?: Remediation } {
  if (!report) {
    if (node.status === 'Unknown') return { changed: false };
    node.status = 'Unknown';
    lifecycleEvent(
      s,
      node.node_id,
      'HealthCheckUnavailable',
      `The health check of ${node.node_id} could not run; it is tried again in the next round.`,
    );
    return { changed: true };
  }
  if (report.healthy) {
    if (node.status !== 'Unhealthy' && node.status !== 'Unknown') return { changed: false };
    node.status = 'Ready';
    s.remediation_declined = s.remediation_declined.filter((id) => id !== node.node_id);
    lifecycleEvent(s, node.node_id, 'HealthCheckRecovered', report.detail);
    return { changed: true };
  }
  const firstFailure = node.status !== 'Unhealthy';
  node.status = 'Unhealthy';
  if (firstFailure) lifecycleEvent(s, node.node_id, 'HealthCheckFailed', report.detail);
  if (s.remediation_declined.includes(node.node_id)) return { changed: firstFailure };
  const now = nowIso();
  const remediation: Remediation = {
    id: `rem-${node.node_id}-hc${s.version}`,
    cluster_id: clusterId,
    instance_id: node.instance_id,
    instance_name: node.node_id,
    mode: 'REMEDIATION_MODE_REBOOT_VM',
    state: node.auto_remediation_enabled ? 'PENDING' : 'PENDING_APPROVAL',
    trigger: 'REMEDIATION_TRIGGER_AUTOMATED',
    reason: `health check failed: ${report.detail}`,
    requested_by: 'gantry health check',
    create_time: now,
    update_time: now,
    active_health_check_run_id: `hc-${clusterId}-${s.version}-${node.node_id}`,
  };
  s.remediations.push(remediation);
  return { changed: true, remediation };
}
