/** zod schemas of the clusters API (spec: Clusters; the SDK's beta.clusters where the spec is silent). */
import { z } from 'zod';
import {
  ADD_ON_TYPES,
  BILLING_TYPES,
  CLUSTER_PHASES,
  CLUSTER_STATUSES,
  CLUSTER_TYPES,
  NODE_PHASES,
  REMEDIATION_MODES,
  REMEDIATION_STATES,
  REMEDIATION_TRIGGERS,
} from '../../shared/clusters';
import { GPU_TYPES } from '../../shared/gpu-types';
import { INT4_MAX, IsoDateTime } from './common';

const count = z.number().int().nonnegative().max(INT4_MAX);
const AddOnConfig = z
  .object(Object.fromEntries(ADD_ON_TYPES.map((t) => [t, z.object({ enabled: z.boolean().optional() }).optional()])))
  .meta({ id: 'ClusterAddOnConfig' });

const OidcConfig = z
  .object({
    issuer_url: z.string().min(1),
    client_id: z.string().min(1),
    username_claim: z.string().min(1),
    username_prefix: z.string(),
    group_claim: z.string().min(1),
    group_prefix: z.string(),
    ca_cert: z.string().optional(),
  })
  .meta({ id: 'ClusterOidcConfig' });

const ClusterConfig = z
  .object({
    load_balancer: z.enum(['NONE', 'TRAEFIK', 'NGINX', 'ISTIO']),
    kubernetes_dashboard_enabled: z.boolean().optional(),
    jumphost_enabled: z.boolean().optional(),
    slurm_startup_scripts: z.record(z.string(), z.string()).optional(),
    ingress: z.object({ enabled: z.boolean().optional() }).optional(),
    observability: z.object({ enabled: z.boolean().optional() }).optional(),
    gpu_operator_version: z.string().optional(),
    network_operator_version: z.string().optional(),
    ssh_ca_enabled: z.boolean().optional(),
  })
  .meta({ id: 'ClusterConfig' });

const AcceptanceTestsParams = z
  .object({
    enabled: z.boolean().optional(),
    dcgm_diag_level: z
      .enum(['DCGM_DIAG_LEVEL_SHORT', 'DCGM_DIAG_LEVEL_MEDIUM', 'DCGM_DIAG_LEVEL_LONG', 'DCGM_DIAG_LEVEL_EXTENDED'])
      .optional(),
    dcgm_diag_skipped: z.boolean().optional(),
    gpu_burn_duration: count.optional(),
    gpu_burn_skipped: z.boolean().optional(),
    nccl_multi_node_skipped: z.boolean().optional(),
    nccl_single_node_skipped: z.boolean().optional(),
    storage_skipped: z.boolean().optional(),
  })
  .meta({ id: 'ClusterAcceptanceTestsParams' });

const SharedVolumeCreate = z.object({
  region: z.string().min(1),
  size_tib: z.number().int().positive().max(INT4_MAX),
  volume_name: z.string().min(1).max(128),
  is_lifecycle_independent: z.boolean().optional(),
  project_id: z.string().optional(),
});

export const CreateClusterBody = z
  .object({
    region: z.string().min(1),
    gpu_type: z.enum(GPU_TYPES),
    num_gpus: count,
    cluster_name: z.string().min(1).max(128),
    billing_type: z.enum(BILLING_TYPES),
    cluster_type: z.enum(CLUSTER_TYPES).optional(),
    duration_days: z.number().int().positive().optional(),
    shared_volume: SharedVolumeCreate.optional(),
    volume_id: z.string().min(1).optional(),
    auto_scaled: z.boolean().optional().meta({ deprecated: true }),
    auto_scale: z.boolean().optional(),
    auto_scale_max_gpus: count.optional(),
    slurm_shm_size_gib: z.number().int().positive().optional(),
    capacity_pool_id: z.string().min(1).optional(),
    reservation_start_time: IsoDateTime.optional(),
    reservation_end_time: IsoDateTime.optional(),
    install_traefik: z.boolean().optional(),
    slurm_image: z.string().min(1).optional(),
    oidc_config: OidcConfig.optional(),
    project_id: z.string().optional(),
    acceptance_tests_params: AcceptanceTestsParams.optional(),
    cluster_config: ClusterConfig.optional(),
    num_capacity_pool_gpus: count.optional(),
    num_preemptible_gpus: count.optional(),
    num_reserved_gpus: count.optional(),
    add_ons: z
      .array(z.object({ add_on_type: z.string().min(1), name: z.string().min(1), config: AddOnConfig.optional() }))
      .optional(),
    nvidia_version_id: z.string().min(1).optional(),
    cuda_version: z.string().min(1).optional(),
    nvidia_driver_version: z.string().min(1).optional(),
    auto_remediation_enabled: z
      .boolean()
      .optional()
      .describe('Gantry extension: repair nodes that fail a health check without waiting for approval.'),
  })
  .meta({ id: 'ClusterCreateRequest' });

export const UpdateClusterBody = z
  .object({
    num_gpus: count.optional(),
    num_reserved_gpus: count.optional(),
    num_capacity_pool_gpus: count.optional(),
    num_preemptible_gpus: count.optional(),
    reservation_end_time: IsoDateTime.optional(),
    cluster_type: z.enum(CLUSTER_TYPES).optional(),
    cluster_config: ClusterConfig.optional(),
    add_ons: z.array(z.object({ name: z.string().min(1), config: AddOnConfig.optional() })).optional(),
    auto_remediation_enabled: z.boolean().optional(),
  })
  .meta({ id: 'ClusterUpdateRequest' });

export const ClusterIdParams = z.object({ cluster_id: z.string().min(1) });
export const ListClustersQuery = z.object({ projectId: z.string().optional() });

const NodeTransition = z.object({ phase: z.enum(NODE_PHASES), transition_time: IsoDateTime });

export const RemediationSchema = z
  .object({
    id: z.string(),
    cluster_id: z.string(),
    instance_id: z.string(),
    instance_name: z.string().optional(),
    mode: z.enum(REMEDIATION_MODES),
    state: z.enum(REMEDIATION_STATES),
    trigger: z.enum(REMEDIATION_TRIGGERS),
    reason: z.string().optional(),
    requested_by: z.string().optional(),
    reviewed_by: z.string().optional(),
    review_comment: z.string().optional(),
    review_time: IsoDateTime.optional(),
    create_time: IsoDateTime.optional(),
    update_time: IsoDateTime.optional(),
    start_time: IsoDateTime.optional(),
    end_time: IsoDateTime.optional(),
    error_message: z.string().optional(),
    active_health_check_run_id: z.string().optional(),
  })
  .meta({ id: 'Remediation' });

const GpuWorkerNode = z
  .object({
    node_id: z.string(),
    status: z.string(),
    host_name: z.string(),
    num_cpu_cores: count,
    num_gpus: count,
    memory_gib: z.number(),
    networks: z.array(z.string()),
    phase_transitions: z.array(NodeTransition),
    instance_id: z.string().optional(),
    latest_remediation: RemediationSchema.optional(),
    slurm_worker_hostname: z.string().optional(),
    marked_for_deletion: z.boolean().optional(),
    public_ipv4: z.string().optional(),
    ib_hca_type: z.string().optional(),
    ib_hca_count: count.optional(),
    nvswitch_count: count.optional(),
    nvswitch_type: z.string().optional(),
    ephemeral_storage: z.string().optional(),
    auto_remediation_enabled: z.boolean().optional(),
    deleted_at: IsoDateTime.optional(),
  })
  .meta({ id: 'ClusterGpuWorkerNode' });

const ControlPlaneNode = z
  .object({
    node_id: z.string(),
    status: z.string(),
    host_name: z.string(),
    num_cpu_cores: count,
    memory_gib: z.number(),
    network: z.string(),
    phase_transitions: z.array(NodeTransition),
    public_ipv4: z.string().optional(),
  })
  .meta({ id: 'ClusterControlPlaneNode' });

export const ClusterVolumeSchema = z
  .object({ volume_id: z.string(), volume_name: z.string(), size_tib: z.number().int(), status: z.string() })
  .meta({ id: 'ClusterVolume' });

export const ClusterSchema = z
  .object({
    cluster_id: z.string(),
    cluster_type: z.enum(CLUSTER_TYPES),
    region: z.string(),
    gpu_type: z.enum(GPU_TYPES),
    cluster_name: z.string(),
    duration_hours: count.optional(),
    volumes: z.array(ClusterVolumeSchema),
    status: z.enum(CLUSTER_STATUSES),
    control_plane_nodes: z.array(ControlPlaneNode),
    gpu_worker_nodes: z.array(GpuWorkerNode),
    kube_config: z.string(),
    num_gpus: count,
    slurm_shm_size_gib: z.number().int().optional(),
    capacity_pool_id: z.string().optional(),
    reservation_start_time: IsoDateTime.optional(),
    reservation_end_time: IsoDateTime.optional(),
    install_traefik: z.boolean().optional(),
    cuda_version: z.string(),
    nvidia_driver_version: z.string(),
    created_at: IsoDateTime.optional(),
    oidc_config: OidcConfig.optional(),
    project_id: z.string(),
    cluster_config: ClusterConfig.optional(),
    num_cpu_workers: count,
    phase_transitions: z.array(z.object({ phase: z.enum(CLUSTER_PHASES), transition_time: IsoDateTime })),
    desired_preemptible_gpus: count,
    allocated_preemptible_gpus: count,
    billing_type: z.enum(BILLING_TYPES),
    add_ons: z.array(
      z.object({
        name: z.string(),
        add_on_type: z.string(),
        config: AddOnConfig,
        state: z.record(z.string(), z.object({})),
      }),
    ),
    first_ready_at: IsoDateTime.optional(),
    control_plane_ready: z.boolean().optional(),
    os_image: z.string().optional(),
    nvidia_driver_version_id: z.string().optional(),
    num_capacity_pool_gpus: count,
    num_reserved_gpus: count,
    deleted_gpu_worker_nodes: z.array(GpuWorkerNode).optional(),
    node_lifecycle_events: z
      .array(z.object({ node_id: z.string(), reason: z.string(), message: z.string(), timestamp: IsoDateTime }))
      .optional(),
    // Gantry additions
    auto_scale: z.boolean().optional(),
    auto_scale_max_gpus: count.optional(),
    deleted_at: IsoDateTime.optional(),
  })
  .meta({ id: 'Cluster' });

export const ClusterListSchema = z.object({ clusters: z.array(ClusterSchema) });
export const ClusterDeleteSchema = z.object({ cluster_id: z.string() });
/** GET /compute/clusters/:cluster_id/credentials: the kubeconfig, as YAML text. */
export const KubeconfigSchema = z.string();

export const RegionsSchema = z
  .object({
    regions: z.array(
      z.object({
        name: z.string(),
        supported_instance_types: z.array(z.string()),
        driver_versions: z.array(
          z.object({ id: z.string(), cuda_version: z.string(), nvidia_driver_version: z.string(), os: z.string() }),
        ),
        usable: z.boolean(),
        description: z.string(),
      }),
    ),
  })
  .meta({ id: 'ClusterRegions' });

// ---- storage volumes ----

export const CreateVolumeBody = SharedVolumeCreate.meta({ id: 'ClusterStorageCreateRequest' });
export const UpdateVolumeBody = z
  .object({ volume_id: z.string().min(1), size_tib: z.number().int().positive().max(INT4_MAX).optional() })
  .meta({ id: 'ClusterStorageUpdateRequest' });
export const VolumeIdParams = z.object({ volume_id: z.string().min(1) });
export const VolumeSchema = z
  .object({
    volume_id: z.string(),
    volume_name: z.string(),
    size_tib: z.number().int(),
    status: z.enum([
      'scheduled',
      'available',
      'bound',
      'provisioning',
      'deleting',
      'failed',
      'access_revoked',
      'unknown',
    ]),
    region: z.string().optional(),
    is_lifecycle_independent: z.boolean().optional(),
    cluster_id: z.string().optional(),
  })
  .meta({ id: 'ClusterStorage' });
/**
 * The SDK's project filter, as on the cluster list.
 * @alias (a second name on purpose, for knip's duplicate-export check)
 */
export const ListVolumesQuery = ListClustersQuery;
export const VolumeListSchema = z.object({ volumes: z.array(VolumeSchema) });
export const VolumeDeleteSchema = z.object({ success: z.boolean() });

// ---- remediations ----

export const InstanceParams = z.object({ cluster_id: z.string().min(1), instance_id: z.string().min(1) });
export const RemediationParams = InstanceParams.extend({ remediation_id: z.string().min(1) });
const csvOrArray = <T extends z.ZodType>(item: T) =>
  z.preprocess((v) => (typeof v === 'string' ? v.split(',') : v), z.array(item)).optional();
export const ListRemediationsQuery = z.object({
  mode: csvOrArray(z.enum(REMEDIATION_MODES)),
  state: csvOrArray(z.enum(REMEDIATION_STATES)),
  trigger: csvOrArray(z.enum(REMEDIATION_TRIGGERS)),
  order_by: z.enum(['create_time', 'create_time desc', 'create_time asc']).optional(),
  page_size: z.coerce.number().int().min(1).max(100).default(50),
  page_token: z.string().regex(/^\d+$/, 'page_token must come from next_page_token').optional(),
});
export const CreateRemediationBody = z.object({
  mode: z.enum(REMEDIATION_MODES),
  reason: z.string().max(1000).optional(),
});
export const CreateRemediationQuery = z.object({
  remediation_id: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/)
    .optional(),
});
export const ApproveRemediationBody = z.object({
  comment: z.string().max(1000).optional(),
  mode: z.enum(REMEDIATION_MODES).optional(),
});
export const RejectRemediationBody = z.object({ comment: z.string().max(1000).optional() });
export const RemediationListSchema = z.object({
  remediations: z.array(RemediationSchema),
  has_next: z.boolean(),
  next_page_token: z.string(),
});

// ---- fleet simulator controls (operators) ----

export const FleetFaultBody = z.object({
  cluster_id: z.string().min(1),
  node_id: z.string().min(1).optional(),
  kind: z.enum(['boot_failure', 'acceptance_failure', 'nccl_failure', 'health_check_failure']),
  count: z.number().int().min(1).max(1000).default(1),
});
export const FleetCapacityBody = z.object({
  region: z.string().min(1),
  gpu_type: z.enum(GPU_TYPES),
  preemptible_nodes: z.number().int().nonnegative().max(INT4_MAX).nullable(),
});
export const FleetWorkloadBody = z.object({
  pending_gpu_requests: count,
  idle_gpus: count.default(0),
});
export const FleetPreemptionBody = z.object({ node_id: z.string().min(1) });

export const FleetAck = z.object({ ok: z.literal(true), simulator: z.literal(true), detail: z.string() });
