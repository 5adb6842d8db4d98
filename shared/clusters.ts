/**
 * GPU clusters: the vocabulary shared by the API, the cluster workflows and
 * their activities (phases, statuses, node shapes, workflow input and state).
 * Pure: imported by workflow code, so no Node APIs here.
 */
import type { GpuType } from './gpu-types';

export const CLUSTER_RESOURCE_TYPE = 'cluster';
export const clusterWorkflowId = (clusterId: string) => `cluster/${clusterId}`;
export const remediationWorkflowId = (clusterId: string, remediationId: string) =>
  `cluster/${clusterId}/remediation/${remediationId}`;
export const volumeWorkflowId = (volumeId: string) => `volume/${volumeId}`;

export const BILLING_TYPES = ['RESERVED', 'ON_DEMAND', 'SCHEDULED_CAPACITY'] as const;
export type BillingType = (typeof BILLING_TYPES)[number];
export const CLUSTER_TYPES = ['KUBERNETES', 'SLURM'] as const;
export type ClusterType = (typeof CLUSTER_TYPES)[number];

export const CLUSTER_PHASES = [
  'CLUSTER_PHASE_QUEUED',
  'CLUSTER_PHASE_SCHEDULED',
  'CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES',
  'CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES',
  'CLUSTER_PHASE_WAITING_FOR_SUBNET',
  'CLUSTER_PHASE_WAITING_FOR_SHARED_VOLUME',
  'CLUSTER_PHASE_WAITING_FOR_AUTO_SCALER',
  'CLUSTER_PHASE_INSTALLING_DRIVERS',
  'CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS',
  'CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED',
  'CLUSTER_PHASE_RUNNING_NCCL_TESTS',
  'CLUSTER_PHASE_NCCL_TESTS_FAILED',
  'CLUSTER_PHASE_READY',
  'CLUSTER_PHASE_PAUSED',
  'CLUSTER_PHASE_ON_DEMAND_COMPUTE_PAUSED',
  'CLUSTER_PHASE_DEGRADED',
  'CLUSTER_PHASE_DELETING',
] as const;
export type ClusterPhase = (typeof CLUSTER_PHASES)[number];

export const CLUSTER_STATUSES = [
  'WaitingForControlPlaneNodes',
  'WaitingForDataPlaneNodes',
  'WaitingForSubnet',
  'WaitingForSharedVolume',
  'InstallingDrivers',
  'RunningAcceptanceTests',
  'Paused',
  'OnDemandComputePaused',
  'Ready',
  'Degraded',
  'Deleting',
] as const;
export type ClusterStatus = (typeof CLUSTER_STATUSES)[number];

/** `status` follows the phase (the spec leaves the mapping open; this is Gantry's). */
export const STATUS_OF_PHASE: Record<ClusterPhase, ClusterStatus> = {
  CLUSTER_PHASE_QUEUED: 'WaitingForControlPlaneNodes',
  CLUSTER_PHASE_SCHEDULED: 'WaitingForControlPlaneNodes',
  CLUSTER_PHASE_WAITING_FOR_CONTROL_PLANE_NODES: 'WaitingForControlPlaneNodes',
  CLUSTER_PHASE_WAITING_FOR_SUBNET: 'WaitingForSubnet',
  CLUSTER_PHASE_WAITING_FOR_DATA_PLANE_NODES: 'WaitingForDataPlaneNodes',
  CLUSTER_PHASE_WAITING_FOR_AUTO_SCALER: 'WaitingForDataPlaneNodes',
  CLUSTER_PHASE_WAITING_FOR_SHARED_VOLUME: 'WaitingForSharedVolume',
  CLUSTER_PHASE_INSTALLING_DRIVERS: 'InstallingDrivers',
  CLUSTER_PHASE_RUNNING_ACCEPTANCE_TESTS: 'RunningAcceptanceTests',
  CLUSTER_PHASE_ACCEPTANCE_TESTS_FAILED: 'RunningAcceptanceTests',
  CLUSTER_PHASE_RUNNING_NCCL_TESTS: 'RunningAcceptanceTests',
  CLUSTER_PHASE_NCCL_TESTS_FAILED: 'RunningAcceptanceTests',
  CLUSTER_PHASE_READY: 'Ready',
  CLUSTER_PHASE_PAUSED: 'Paused',
  CLUSTER_PHASE_ON_DEMAND_COMPUTE_PAUSED: 'OnDemandComputePaused',
  CLUSTER_PHASE_DEGRADED: 'Degraded',
  CLUSTER_PHASE_DELETING: 'Deleting',
};

export const NODE_PHASES = [
  'NODE_PHASE_PENDING',
  'NODE_PHASE_SCHEDULING',
  'NODE_PHASE_BOOTING',
  'NODE_PHASE_BOOTSTRAPPING',
  'NODE_PHASE_RUNNING',
  'NODE_PHASE_SUCCEEDED',
  'NODE_PHASE_FAILED',
  'NODE_PHASE_PAUSED',
] as const;
export type NodePhase = (typeof NODE_PHASES)[number];

export interface PhaseTransition<P extends string> {
  phase: P;
  transition_time: string;
}

/** Where a worker node's GPUs come from (Gantry's bookkeeping; not a spec field). */
export type NodeCapacity = 'reserved' | 'capacity_pool' | 'on_demand' | 'preemptible';

/** A node as the fleet describes it: the hardware and its phases so far. */
export interface FleetNode {
  node_id: string;
  instance_id: string;
  host_name: string;
  role: 'control-plane' | 'gpu-worker';
  num_gpus: number;
  num_cpu_cores: number;
  memory_gib: number;
  networks: string[];
  public_ipv4?: string;
  ib_hca_type?: string;
  ib_hca_count?: number;
  nvswitch_count?: number;
  nvswitch_type?: string;
  ephemeral_storage?: string;
  phase_transitions: Array<PhaseTransition<NodePhase>>;
}

/** A node as the cluster workflow tracks it. */
export interface ClusterNode extends FleetNode {
  status: string;
  capacity: NodeCapacity;
  auto_remediation_enabled: boolean;
  marked_for_deletion?: boolean;
  deleted_at?: string;
  slurm_worker_hostname?: string;
}

export interface NodeLifecycleEvent {
  node_id: string;
  reason: string;
  message: string;
  timestamp: string;
}

export const ADD_ON_TYPES = ['dashboard', 'headlamp', 'ingress', 'slurm_web', 'torchpass'] as const;
export type AddOnType = (typeof ADD_ON_TYPES)[number];
export interface AddOn {
  name: string;
  add_on_type: AddOnType;
  config: Partial<Record<AddOnType, { enabled?: boolean }>>;
}

export interface AcceptanceTestsParams {
  enabled?: boolean;
  dcgm_diag_level?:
    'DCGM_DIAG_LEVEL_SHORT' | 'DCGM_DIAG_LEVEL_MEDIUM' | 'DCGM_DIAG_LEVEL_LONG' | 'DCGM_DIAG_LEVEL_EXTENDED';
  dcgm_diag_skipped?: boolean;
  gpu_burn_duration?: number;
  gpu_burn_skipped?: boolean;
  nccl_multi_node_skipped?: boolean;
  nccl_single_node_skipped?: boolean;
  storage_skipped?: boolean;
}

/** What a create request resolves to, after every rule has been applied (api/cluster-create.ts). */
export interface ClusterSpec {
  cluster_name: string;
  cluster_type: ClusterType;
  region: string;
  gpu_type: GpuType;
  billing_type: BillingType;
  nvidia_version_id: string;
  cuda_version: string;
  nvidia_driver_version: string;
  os_image: string;
  duration_days?: number;
  reservation_start_time?: string;
  reservation_end_time?: string;
  capacity_pool_id?: string;
  slurm_shm_size_gib?: number;
  slurm_image?: string;
  install_traefik?: boolean;
  oidc_config?: Record<string, string>;
  cluster_config?: Record<string, unknown>;
  acceptance_tests_params?: AcceptanceTestsParams;
  auto_scale: boolean;
  auto_scale_max_gpus?: number;
  auto_remediation_enabled: boolean;
  add_ons: AddOn[];
  /** A volume to bind: an existing one, or the one created inline with the cluster. */
  volume_id?: string;
}

export interface GpuCounts {
  num_gpus: number;
  num_reserved_gpus: number;
  num_capacity_pool_gpus: number;
  desired_preemptible_gpus: number;
}

export const GPUS_PER_NODE = 8;

/** Timings of the cluster workflow; from configuration, fixed per run so replay is deterministic. */
export interface ClusterSettings {
  healthCheckIntervalSeconds: number;
  autoscaleCooldownSeconds: number;
  /** The spec's drain window for preempted nodes: 300 seconds. Tests shorten it. */
  preemptionGraceSeconds: number;
  /** Repair rounds for failed acceptance or NCCL tests before the cluster settles as Degraded. */
  maxTestRepairRounds: number;
  /** Main-loop rounds before continue-as-new (Temporal's own suggestion also triggers it). */
  maxRoundsPerRun: number;
  /** How long node tests wait for a worker on gpu.<type> before the cluster says none is serving it. */
  gpuQueueWaitSeconds?: number;
  /** Probes of an unserved GPU queue during bring-up's tests before the run continues as new (absent: 50). */
  bringUpProbesPerRun?: number;
}

export const REMEDIATION_MODES = [
  'REMEDIATION_MODE_VM_ONLY',
  'REMEDIATION_MODE_HOST_AWARE',
  'REMEDIATION_MODE_EVICT_WITHOUT_REPLACEMENT',
  'REMEDIATION_MODE_REBOOT_VM',
  'REMEDIATION_MODE_HOST_POWER_CYCLE',
] as const;
export type RemediationMode = (typeof REMEDIATION_MODES)[number];
export const REMEDIATION_STATES = [
  'PENDING_APPROVAL',
  'PENDING',
  'RUNNING',
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
  'AUTO_RESOLVED',
  'QUARANTINING',
  'QUARANTINED',
] as const;
export type RemediationState = (typeof REMEDIATION_STATES)[number];
export const REMEDIATION_TRIGGERS = ['REMEDIATION_TRIGGER_MANUAL', 'REMEDIATION_TRIGGER_AUTOMATED'] as const;
export type RemediationTrigger = (typeof REMEDIATION_TRIGGERS)[number];
export const FINAL_REMEDIATION_STATES: readonly RemediationState[] = [
  'SUCCEEDED',
  'FAILED',
  'CANCELLED',
  'AUTO_RESOLVED',
];

/** The SDK's Remediation object (the fields Gantry fills). */
export interface Remediation {
  id: string;
  cluster_id: string;
  instance_id: string;
  instance_name?: string;
  mode: RemediationMode;
  state: RemediationState;
  trigger: RemediationTrigger;
  reason?: string;
  requested_by?: string;
  reviewed_by?: string;
  review_comment?: string;
  review_time?: string;
  create_time: string;
  update_time: string;
  start_time?: string;
  end_time?: string;
  error_message?: string;
  active_health_check_run_id?: string;
}

export interface ClusterWorkflowInput {
  clusterId: string;
  projectId: string;
  spec: ClusterSpec;
  counts: GpuCounts;
  settings: ClusterSettings;
  /** Set when the run continues as new: everything the previous run knew. */
  carried?: ClusterState;
  /**
   * Set when the API deletes a cluster whose workflow is gone (it failed or was
   * terminated): the new run starts from the last projected state and goes
   * straight to tear-down, releasing everything held for the cluster.
   */
  deleteOnStart?: string;
  /**
   * Set when a run continued as new while bring-up's node tests waited for a GPU worker: the new
   * run goes on with bring-up's tests (the nodes, subnet and drivers are in `carried`).
   */
  resumeBringUpTests?: boolean;
}

/** The cluster as its workflow knows it; projected into PostgreSQL on every change. */
export interface ClusterState {
  version: number;
  spec: ClusterSpec;
  counts: GpuCounts;
  phase: ClusterPhase;
  phase_transitions: Array<PhaseTransition<ClusterPhase>>;
  control_plane_nodes: ClusterNode[];
  gpu_worker_nodes: ClusterNode[];
  deleted_gpu_worker_nodes: ClusterNode[];
  node_lifecycle_events: NodeLifecycleEvent[];
  allocated_preemptible_gpus: number;
  control_plane_ready: boolean;
  first_ready_at?: string;
  subnet?: string;
  /** Open remediations (the final ones live only in PostgreSQL). */
  remediations: Remediation[];
  /** Nodes under a preemption notice: node id -> when the drain ends. */
  draining: Record<string, string>;
  last_scale_at?: string;
  deleted_at?: string;
  deletion_reason?: string;
  /** Provisioning finished (Ready or Degraded reached at least once). */
  provisioned: boolean;
  node_seq: number;
  /** What the autoscaler wants (between num_gpus and auto_scale_max_gpus). */
  autoscale_target_gpus: number;
  /** Nodes whose automated remediation was rejected: not proposed again until they pass a health check. */
  remediation_declined: string[];
  /** Since when no worker has served the cluster's GPU queue (said once per outage, across runs). */
  accelerator_queue_unserved_since?: string;
}

/** Keeps the lifecycle-event list to what the cluster object calls "recent". */
export const MAX_LIFECYCLE_EVENTS = 200;
export const MAX_DELETED_NODES = 100;
/**
 * Phase transitions kept on the cluster: the first (when it was created) and
 * the most recent ones. A cluster that flaps between Ready and Degraded for a
 * month would otherwise carry every transition through each continue-as-new.
 */
export const MAX_PHASE_TRANSITIONS = 100;
/** The same for each node: its first phase and its latest ones (a node rebooted daily for a month has hundreds). */
export const MAX_NODE_PHASE_TRANSITIONS = 50;

/** Names of the cluster workflow's messages (the API sends them by name). */
export const CLUSTER_MESSAGES = {
  update: 'updateCluster',
  delete: 'deleteCluster',
  createRemediation: 'createRemediation',
  reviewRemediation: 'reviewRemediation',
  preemptionNotice: 'preemptionNotice',
  remediationProgress: 'remediationProgress',
} as const;

export interface CreateRemediationRequest {
  remediationId: string;
  instanceId: string;
  mode: RemediationMode;
  reason?: string;
  requestedBy: string;
}

export interface ReviewRemediationRequest {
  remediationId: string;
  action: 'approve' | 'reject' | 'cancel';
  comment?: string;
  mode?: RemediationMode;
  by: string;
}

export const nowIso = () => new Date().toISOString();

/** A new cluster's state: queued, nothing provisioned. Workflow time inside the workflow, wall time in the API. */
export function initialState(input: ClusterWorkflowInput): ClusterState {
  return {
    version: 1,
    spec: input.spec,
    counts: input.counts,
    phase: 'CLUSTER_PHASE_QUEUED',
    phase_transitions: [{ phase: 'CLUSTER_PHASE_QUEUED', transition_time: nowIso() }],
    control_plane_nodes: [],
    gpu_worker_nodes: [],
    deleted_gpu_worker_nodes: [],
    node_lifecycle_events: [],
    allocated_preemptible_gpus: 0,
    control_plane_ready: false,
    remediations: [],
    draining: {},
    provisioned: false,
    node_seq: 0,
    autoscale_target_gpus: input.counts.num_gpus,
    remediation_declined: [],
  };
}
