/**
 * The spec's rules for cluster create and update requests, in one place. Pure
 * (no I/O), so the API checks a request with them before it reaches Temporal,
 * and the cluster workflow's update validator checks it again against the
 * state it really has. Each broken rule names its field.
 */
import { findDriverByPair, findRegion } from './cluster-catalog';
import {
  ADD_ON_TYPES,
  GPUS_PER_NODE,
  type AcceptanceTestsParams,
  type AddOn,
  type BillingType,
  type ClusterSpec,
  type ClusterType,
  type GpuCounts,
} from './clusters';
import type { GpuType } from './gpu-types';

export class ClusterRuleError extends Error {
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
    this.name = 'ClusterRuleError';
  }
}

const fail = (param: string, message: string): never => {
  throw new ClusterRuleError(param, message);
};

function multipleOf8(param: string, value: number | undefined, min = 0) {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < min || value % GPUS_PER_NODE !== 0) {
    fail(
      param,
      `${param} must be a multiple of ${GPUS_PER_NODE}${min > 0 ? ` and at least ${min}` : ''}; got ${value}.`,
    );
  }
}

/** The create body after zod (shape and types) and before the rules. */
export interface ClusterCreateRequest {
  region: string;
  gpu_type: GpuType;
  num_gpus: number;
  cluster_name: string;
  billing_type: BillingType;
  cluster_type?: ClusterType;
  duration_days?: number;
  shared_volume?: { region: string; size_tib: number; volume_name: string; is_lifecycle_independent?: boolean };
  volume_id?: string;
  auto_scaled?: boolean;
  auto_scale?: boolean;
  auto_scale_max_gpus?: number;
  slurm_shm_size_gib?: number;
  capacity_pool_id?: string;
  reservation_start_time?: string;
  reservation_end_time?: string;
  install_traefik?: boolean;
  slurm_image?: string;
  oidc_config?: Record<string, string>;
  project_id?: string;
  acceptance_tests_params?: AcceptanceTestsParams;
  cluster_config?: Record<string, unknown>;
  num_capacity_pool_gpus?: number;
  num_preemptible_gpus?: number;
  num_reserved_gpus?: number;
  add_ons?: Array<{ add_on_type: string; name: string; config?: AddOn['config'] }>;
  nvidia_version_id?: string;
  cuda_version?: string;
  nvidia_driver_version?: string;
  auto_remediation_enabled?: boolean;
}

/**
 * Applies every create rule; returns the resolved spec and GPU counts. `now`
 * is passed in so the rules stay pure. `volume_id` of an inline shared volume
 * is filled in by the caller after it creates the volume.
 */
export function resolveClusterCreate(req: ClusterCreateRequest, now: Date): { spec: ClusterSpec; counts: GpuCounts } {
  const region = findRegion(req.region);
  if (!region) fail('region', `Unknown region '${req.region}'. List usable regions with GET /v1/compute/regions.`);
  if (!region!.usable) fail('region', `Region '${req.region}' is not usable: ${region!.description}.`);
  if (!region!.supported_instance_types.includes(req.gpu_type)) {
    fail(
      'gpu_type',
      `Region '${req.region}' has no ${req.gpu_type}; it offers ${region!.supported_instance_types.join(', ')}.`,
    );
  }

  // Driver and CUDA: the canonical id, or the legacy pair (which must agree with the id when both are sent).
  const legacy = req.cuda_version !== undefined || req.nvidia_driver_version !== undefined;
  let driver;
  if (legacy) {
    if (req.cuda_version === undefined) fail('cuda_version', 'cuda_version is required with nvidia_driver_version.');
    if (req.nvidia_driver_version === undefined) {
      fail('nvidia_driver_version', 'nvidia_driver_version is required with cuda_version.');
    }
    driver = findDriverByPair(region!, req.cuda_version!, req.nvidia_driver_version!);
    if (!driver) {
      fail(
        'cuda_version',
        `Region '${req.region}' has no image for CUDA '${req.cuda_version}' with driver '${req.nvidia_driver_version}'. See driver_versions in GET /v1/compute/regions.`,
      );
    }
    if (req.nvidia_version_id !== undefined && req.nvidia_version_id !== driver!.id) {
      fail(
        'nvidia_version_id',
        `nvidia_version_id '${req.nvidia_version_id}' does not match cuda_version '${req.cuda_version}' + nvidia_driver_version '${req.nvidia_driver_version}' (which resolve to '${driver!.id}').`,
      );
    }
  } else {
    if (req.nvidia_version_id === undefined) {
      fail('nvidia_version_id', 'nvidia_version_id is required (or the legacy cuda_version + nvidia_driver_version).');
    }
    driver = region!.driver_versions.find((d) => d.id === req.nvidia_version_id);
    if (!driver) {
      fail(
        'nvidia_version_id',
        `nvidia_version_id '${req.nvidia_version_id}' is not offered in region '${req.region}'.`,
      );
    }
  }

  const clusterType = req.cluster_type ?? 'KUBERNETES';
  const autoScale = req.auto_scale === true || req.auto_scaled === true;
  // The spec's rule is multiples of 8: 0 is a control plane with no GPU workers yet (grown by an update).
  multipleOf8('num_gpus', req.num_gpus);
  multipleOf8('num_preemptible_gpus', req.num_preemptible_gpus);

  // Billing. RESERVED runs for duration_days, or until reservation_end_time (one of the two).
  const reservedUntil = req.billing_type === 'RESERVED' ? req.reservation_end_time : undefined;
  if (req.billing_type === 'RESERVED') {
    if (req.duration_days === undefined && reservedUntil === undefined) {
      fail('duration_days', 'RESERVED billing needs how long: duration_days, or a reservation_end_time.');
    }
    if (req.duration_days !== undefined && reservedUntil !== undefined) {
      fail('reservation_end_time', 'Set duration_days or reservation_end_time for RESERVED billing, not both.');
    }
    if (reservedUntil !== undefined && !(Date.parse(reservedUntil) > now.getTime())) {
      fail('reservation_end_time', 'reservation_end_time must be in the future.');
    }
  } else if (req.duration_days !== undefined) {
    fail('duration_days', 'duration_days applies only to RESERVED billing.');
  }
  if (req.billing_type === 'SCHEDULED_CAPACITY') {
    if (req.reservation_end_time === undefined) {
      fail('reservation_end_time', 'reservation_end_time is required for SCHEDULED_CAPACITY billing.');
    }
    const end = Date.parse(req.reservation_end_time!);
    const start = req.reservation_start_time ? Date.parse(req.reservation_start_time) : now.getTime();
    if (end <= now.getTime()) fail('reservation_end_time', 'reservation_end_time must be in the future.');
    if (end <= start) fail('reservation_end_time', 'reservation_end_time must be after reservation_start_time.');
  } else {
    if (req.reservation_start_time !== undefined) {
      fail('reservation_start_time', 'reservation_start_time applies only to SCHEDULED_CAPACITY billing.');
    }
    if (req.reservation_end_time !== undefined && req.billing_type !== 'RESERVED') {
      fail('reservation_end_time', 'reservation_end_time applies to RESERVED and SCHEDULED_CAPACITY billing.');
    }
  }

  // GPU counts: num_gpus = reserved + capacity pool (+ on-demand for clusters that are not RESERVED).
  if (req.num_capacity_pool_gpus !== undefined && req.capacity_pool_id === undefined) {
    fail(
      'num_capacity_pool_gpus',
      'num_capacity_pool_gpus applies only to clusters created from a capacity pool (capacity_pool_id).',
    );
  }
  multipleOf8('num_capacity_pool_gpus', req.num_capacity_pool_gpus);
  const pool = req.num_capacity_pool_gpus ?? 0;
  if (pool > req.num_gpus) {
    fail('num_capacity_pool_gpus', `num_capacity_pool_gpus (${pool}) must not exceed num_gpus (${req.num_gpus}).`);
  }
  let reserved = 0;
  if (req.billing_type === 'RESERVED') {
    multipleOf8('num_reserved_gpus', req.num_reserved_gpus);
    reserved = req.num_reserved_gpus ?? req.num_gpus - pool;
    if (reserved + pool !== req.num_gpus) {
      fail(
        'num_reserved_gpus',
        `num_reserved_gpus (${reserved}) + num_capacity_pool_gpus (${pool}) must equal num_gpus (${req.num_gpus}).`,
      );
    }
  } else if (req.num_reserved_gpus !== undefined) {
    fail('num_reserved_gpus', 'num_reserved_gpus applies only to RESERVED billing.');
  }

  // Flavour-specific settings.
  if (clusterType === 'SLURM') {
    if (req.slurm_shm_size_gib === undefined)
      fail('slurm_shm_size_gib', 'slurm_shm_size_gib is required for SLURM clusters.');
    if (req.oidc_config !== undefined) fail('oidc_config', 'oidc_config applies only to KUBERNETES clusters.');
    if (req.install_traefik !== undefined)
      fail('install_traefik', 'install_traefik applies only to KUBERNETES clusters.');
  } else if (req.slurm_image !== undefined) {
    fail('slurm_image', 'slurm_image applies only to SLURM clusters.');
  }

  if (autoScale) {
    if (req.auto_scale_max_gpus === undefined) {
      fail('auto_scale_max_gpus', 'auto_scale_max_gpus is required when auto scaling is enabled.');
    }
    multipleOf8('auto_scale_max_gpus', req.auto_scale_max_gpus, GPUS_PER_NODE);
    if (req.auto_scale_max_gpus! < req.num_gpus) {
      fail(
        'auto_scale_max_gpus',
        `auto_scale_max_gpus (${req.auto_scale_max_gpus}) must be at least num_gpus (${req.num_gpus}).`,
      );
    }
  }

  if (req.shared_volume && req.volume_id) fail('volume_id', 'Send either shared_volume or volume_id, not both.');
  if (req.shared_volume && req.shared_volume.region !== req.region) {
    fail('shared_volume.region', `The shared volume must be in the cluster's region '${req.region}'.`);
  }

  const addOns = resolveAddOns(req.add_ons ?? []);

  const spec: ClusterSpec = {
    cluster_name: req.cluster_name,
    cluster_type: clusterType,
    region: req.region,
    gpu_type: req.gpu_type,
    billing_type: req.billing_type,
    nvidia_version_id: driver!.id,
    cuda_version: driver!.cuda_version,
    nvidia_driver_version: driver!.nvidia_driver_version,
    os_image: driver!.os,
    duration_days: req.duration_days,
    reservation_start_time: req.reservation_start_time,
    reservation_end_time: req.reservation_end_time,
    capacity_pool_id: req.capacity_pool_id,
    slurm_shm_size_gib: req.slurm_shm_size_gib,
    slurm_image: req.slurm_image,
    install_traefik: clusterType === 'KUBERNETES' ? (req.install_traefik ?? false) : undefined,
    oidc_config: req.oidc_config,
    cluster_config: req.cluster_config,
    acceptance_tests_params: req.acceptance_tests_params,
    auto_scale: autoScale,
    auto_scale_max_gpus: autoScale ? req.auto_scale_max_gpus : undefined,
    auto_remediation_enabled: req.auto_remediation_enabled ?? false,
    add_ons: addOns,
    volume_id: req.volume_id,
  };
  return {
    spec,
    counts: {
      num_gpus: req.num_gpus,
      num_reserved_gpus: reserved,
      num_capacity_pool_gpus: pool,
      desired_preemptible_gpus: req.num_preemptible_gpus ?? 0,
    },
  };
}

function resolveAddOns(addOns: NonNullable<ClusterCreateRequest['add_ons']>): AddOn[] {
  const names = new Set<string>();
  return addOns.map((a, i) => {
    if (!(ADD_ON_TYPES as readonly string[]).includes(a.add_on_type)) {
      fail(
        `add_ons[${i}].add_on_type`,
        `Unknown add-on type '${a.add_on_type}'; use one of ${ADD_ON_TYPES.join(', ')}.`,
      );
    }
    if (names.has(a.name)) fail(`add_ons[${i}].name`, `Add-on name '${a.name}' is used twice.`);
    names.add(a.name);
    return { name: a.name, add_on_type: a.add_on_type as AddOn['add_on_type'], config: a.config ?? {} };
  });
}

export interface ClusterUpdateRequest {
  num_gpus?: number;
  num_reserved_gpus?: number;
  num_capacity_pool_gpus?: number;
  num_preemptible_gpus?: number;
  reservation_end_time?: string;
  cluster_type?: ClusterType;
  cluster_config?: Record<string, unknown>;
  add_ons?: Array<{ name: string; config?: AddOn['config'] }>;
  auto_remediation_enabled?: boolean;
}

/** Applies the update rules to the cluster as it is; returns the new counts (or throws naming the field). */
export function resolveClusterUpdate(
  spec: ClusterSpec,
  counts: GpuCounts,
  req: ClusterUpdateRequest,
  now: Date,
): GpuCounts {
  if (req.cluster_type !== undefined && req.cluster_type !== spec.cluster_type) {
    fail('cluster_type', `A ${spec.cluster_type} cluster cannot become ${req.cluster_type}; create a new cluster.`);
  }
  if (req.num_reserved_gpus !== undefined && spec.billing_type !== 'RESERVED') {
    fail('num_reserved_gpus', 'num_reserved_gpus applies only to RESERVED billing.');
  }
  if (req.num_capacity_pool_gpus !== undefined && !spec.capacity_pool_id) {
    fail('num_capacity_pool_gpus', 'num_capacity_pool_gpus applies only to clusters created with a capacity pool.');
  }
  multipleOf8('num_gpus', req.num_gpus, spec.auto_scale ? 0 : GPUS_PER_NODE);
  multipleOf8('num_reserved_gpus', req.num_reserved_gpus);
  multipleOf8('num_capacity_pool_gpus', req.num_capacity_pool_gpus);
  multipleOf8('num_preemptible_gpus', req.num_preemptible_gpus);

  const pool = req.num_capacity_pool_gpus ?? counts.num_capacity_pool_gpus;
  let total = req.num_gpus ?? counts.num_gpus;
  let reserved = counts.num_reserved_gpus;
  if (spec.billing_type === 'RESERVED') {
    if (req.num_reserved_gpus !== undefined && req.num_gpus === undefined) total = req.num_reserved_gpus + pool;
    reserved = req.num_reserved_gpus ?? total - pool;
    if (reserved < 0 || reserved + pool !== total) {
      fail(
        req.num_reserved_gpus !== undefined ? 'num_reserved_gpus' : 'num_capacity_pool_gpus',
        `num_reserved_gpus (${reserved}) + num_capacity_pool_gpus (${pool}) must equal num_gpus (${total}).`,
      );
    }
  }
  if (pool > total)
    fail('num_capacity_pool_gpus', `num_capacity_pool_gpus (${pool}) must not exceed num_gpus (${total}).`);
  if (spec.auto_scale && spec.auto_scale_max_gpus !== undefined && total > spec.auto_scale_max_gpus) {
    fail('num_gpus', `num_gpus (${total}) must not exceed auto_scale_max_gpus (${spec.auto_scale_max_gpus}).`);
  }

  if (req.reservation_end_time !== undefined) {
    if (spec.billing_type !== 'RESERVED') {
      fail('reservation_end_time', 'reservation_end_time can be updated only on prepaid (RESERVED) clusters.');
    }
    if (Date.parse(req.reservation_end_time) <= now.getTime()) {
      fail('reservation_end_time', 'reservation_end_time must be in the future.');
    }
  }
  (req.add_ons ?? []).forEach((a, i) => {
    if (!spec.add_ons.some((x) => x.name === a.name)) {
      fail(`add_ons[${i}].name`, `The cluster has no add-on named '${a.name}'.`);
    }
  });
  return {
    num_gpus: total,
    num_reserved_gpus: reserved,
    num_capacity_pool_gpus: pool,
    desired_preemptible_gpus: req.num_preemptible_gpus ?? counts.desired_preemptible_gpus,
  };
}

/** When a cluster's paid time ends: RESERVED after duration_days (or an updated end), SCHEDULED at its end time. */
export function clusterExpiry(spec: ClusterSpec, createdAt: Date): Date | undefined {
  if (spec.billing_type === 'SCHEDULED_CAPACITY' && spec.reservation_end_time)
    return new Date(spec.reservation_end_time);
  if (spec.billing_type === 'RESERVED') {
    if (spec.reservation_end_time) return new Date(spec.reservation_end_time);
    if (spec.duration_days !== undefined) return new Date(createdAt.getTime() + spec.duration_days * 86_400_000);
  }
  return undefined;
}
