/**
 * Container deployments: the vocabulary shared by the API, the deployment
 * workflow and the container runtime. Pure (no Node APIs): imported by workflows.
 */
export const deploymentWorkflowId = (id: string) => `deployment/${id}`;

/** Names of the deployment workflow's messages (the definitions are in workflows/deployments.ts). */
export const DEPLOYMENT_MESSAGES = {
  update: 'updateDeployment',
  delete: 'deleteDeployment',
  setReplicaBounds: 'setReplicaBounds',
} as const;
/** The workflow that holds the claim timers and retention periods of a deployment's job queue. */
export const queueDispatcherWorkflowId = (deploymentId: string) => `queue-dispatcher/${deploymentId}`;
/**
 * The failure a replica's supervisor ends with when its container host is shut down to restart
 * under the same name (GANTRY_CONTAINER_HOST_ID): the replica runs on, for the restarted process
 * to adopt and the deployment to re-attach to.
 */
export const HOST_RESTARTING = 'HostRestarting';

export const CONTAINERS_TASK_QUEUE = 'containers';
/** The queue of one container host process: replicas are supervised where they were launched. */
export const containerHostQueue = (host: string) => `containers@${host}`;

export const DEPLOYMENT_STATUSES = ['Updating', 'Scaling', 'Ready', 'Failed', 'ScaledToZero'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

export interface EnvVar {
  name: string;
  value?: string;
  value_from_secret?: string;
}

export interface DeploymentSpec {
  name: string;
  description?: string;
  image: string;
  command?: string[];
  args?: string[];
  cpu?: number;
  memory?: number;
  storage?: number;
  gpu_count?: number;
  gpu_type?: string;
  port: number;
  health_check_path?: string;
  min_replicas: number;
  max_replicas: number;
  termination_grace_period_seconds: number;
  capacity_type?: string;
  environment_variables: EnvVar[];
  volumes?: Array<{ mount_path: string; name: string; version?: number }>;
  model_mounts?: Array<{ model_id: string; mount_path: string; revision_id?: string }>;
  autoscaling?: Record<string, unknown>;
}

export interface DeploymentWorkflowInput {
  deploymentId: string;
  projectId: string;
  spec: DeploymentSpec;
  /** Longest wait between restarts of a replica that keeps dying. */
  maxRestartBackoffSeconds: number;
  /** How often the autoscaler observes its metric (runs started before it existed: 15 s). */
  autoscaleIntervalSeconds?: number;
  /** Least time between an autoscaling action and a scale-down (runs started before it existed: 60 s). */
  autoscaleCooldownSeconds?: number;
  /** How long a launch waits for a container host to take it (runs started before it existed: 60 s). */
  containerWaitSeconds?: number;
  /** Main-loop rounds of one run before it continues as new (runs started before it existed: 1000). */
  maxRoundsPerRun?: number;
  /** Set when the run continues as new: what the previous run knew, and the replicas it hands over. */
  carried?: CarriedDeployment;
  /**
   * Why this run starts deleting at once: the deployment's workflow had ended without deleting it
   * (it failed, or was terminated), and DELETE started this run to stop what it left behind.
   */
  deleteOnStart?: string;
}

export interface CarriedDeployment {
  state: DeploymentState;
  /** Which run carried this (0: the first); absent when carried by code that did not count runs. */
  generation?: number;
  seq: number;
  failures: number;
  autoscaled?: number;
  lastScaleAt: number;
  replicas: Array<{ replicaId: string; revision: number; hostQueue: string; image: string }>;
}

/** The autoscaling configurations Gantry acts on (the SDK's CustomMetric, QueueBacklogPerWorker and HTTP ones). */
export type ActiveAutoscaling =
  | { metric: 'CustomMetric'; custom_metric_name: string; target: number; time_interval_minutes?: number }
  | { metric: 'QueueBacklogPerWorker'; target: number; time_interval_minutes?: number }
  | { metric: 'HTTPTotalRequests'; target: number; time_interval_minutes?: number }
  /** target: milliseconds of mean answer time per request (the SDK's default 500). */
  | { metric: 'HTTPAvgRequestDuration'; target: number; time_interval_minutes?: number };

export function activeAutoscaling(spec: DeploymentSpec): ActiveAutoscaling | undefined {
  const a = spec.autoscaling as Record<string, unknown> | undefined;
  if (!a || typeof a.target !== 'number' || a.target <= 0) return undefined;
  if (a.metric === 'CustomMetric' && typeof a.custom_metric_name === 'string') return a as ActiveAutoscaling;
  if (a.metric === 'QueueBacklogPerWorker' || a.metric === 'HTTPTotalRequests') return a as ActiveAutoscaling;
  if (a.metric === 'HTTPAvgRequestDuration') return a as ActiveAutoscaling;
  return undefined;
}

/** The variable that tells a replica (and, in the API's view, a client) which revision it runs. */
export const REVISION_ENV = 'TOGETHER_DEPLOYMENT_REVISION_ID';

export interface ReplicaLaunch {
  deploymentId: string;
  projectId: string;
  replicaId: string;
  revision: number;
  spec: DeploymentSpec;
}

export interface LaunchedReplica {
  replicaId: string;
  hostQueue: string;
  port: number;
}

export interface DeploymentState {
  revision: number;
  spec: DeploymentSpec;
  desired_replicas: number;
  status: DeploymentStatus;
  deleted: boolean;
}

/** Fields that only size or describe a deployment: changing them does not roll its replicas. */
const NOT_TEMPLATE: ReadonlyArray<keyof DeploymentSpec> = [
  'name',
  'description',
  'min_replicas',
  'max_replicas',
  'autoscaling',
  'termination_grace_period_seconds',
];

/** True when a change alters what a replica runs (a new revision, rolled out replica by replica). */
export function changesReplicaTemplate(before: DeploymentSpec, after: DeploymentSpec): boolean {
  const template = (s: DeploymentSpec) =>
    JSON.stringify(
      Object.entries(s)
        .filter(([k]) => !NOT_TEMPLATE.includes(k as keyof DeploymentSpec))
        .sort(),
    );
  return template(before) !== template(after);
}

/** One observation of the autoscaling metric (its total over the replicas, or the backlog). */
export interface DemandSample {
  at: number;
  demand: number;
}

/**
 * The autoscaler's decision on a new observation (pure; `window` is updated in place): the
 * replicas the latest observation asks for scale up at once; a scale-down needs the whole
 * `time_interval_minutes` window to agree and the cool-down since the last action to have passed.
 * Returns the replica count to move to, or undefined to stay.
 */
export function autoscaleDecision(
  a: ActiveAutoscaling,
  window: DemandSample[],
  observed: DemandSample,
  s: { current: number; min: number; max: number; lastScaleAt: number; cooldownSeconds: number },
): number | undefined {
  window.push(observed);
  const windowMs = (a.time_interval_minutes ?? 1) * 60_000;
  while (window.length > 1 && window[0].at < observed.at - windowMs) window.shift();
  const clamp = (n: number) => Math.min(s.max, Math.max(s.min, n));
  const up = clamp(Math.ceil(observed.demand / a.target));
  const down = clamp(Math.ceil(Math.max(...window.map((x) => x.demand)) / a.target));
  if (up > s.current) return up;
  if (down < s.current && observed.at - s.lastScaleAt >= s.cooldownSeconds * 1000) return down;
  return undefined;
}

/**
 * Where each replica of a deployment finds the adapters attached to it (a read-only mount of its
 * host's directory for the deployment, providers/containers/adapter-files.ts). Empty unless the
 * deployment is an endpoint's model server; no declared mount may overlap it.
 */
export const ADAPTERS_MOUNT_PATH = '/gantry/adapters';

/**
 * Where a running replica answers: `http://<its host's address>:<port>`. Everything that calls a
 * replica (the gateway, metric scrapes, adapter loads, health checks) goes through this, so a
 * replica on another container host is reached there and never at this machine's loopback.
 */
export function replicaOrigin(address: string | null, port: number): string {
  const host = address ?? '127.0.0.1';
  // An IPv6 address (the only form with a colon) goes in brackets.
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * A path a replica is asked on (`health_check_path`): `/`, then printable ASCII without a space or
 * a backslash, and not `//` (which a URL resolver reads as another host: `//evil.example/`).
 */
export const REPLICA_PATH = /^\/(?:[\x21-\x2e\x30-\x5b\x5d-\x7e][\x21-\x5b\x5d-\x7e]*)?$/;

/**
 * The URL of `path` on the replica at `origin` (replicaOrigin): always that origin. A path that
 * would name another (a health path stored before REPLICA_PATH was checked) throws.
 */
export function replicaUrl(origin: string, path: string): string {
  const url = new URL(origin + path);
  if (!REPLICA_PATH.test(path) || url.origin !== new URL(origin).origin)
    throw new Error(`${JSON.stringify(path)} is not a path of the replica`);
  return url.href;
}
