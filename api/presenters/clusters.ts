/**
 * How the clusters area is shown: the GPU cluster object of the spec, built from a cluster's row,
 * its volumes and its remediations, and a shared storage volume.
 */
import { STATUS_OF_PHASE, type ClusterNode, type Remediation } from '../../shared/clusters';
import type { ClusterRow, VolumeRow } from '../../db/clusters';

function workerNode(n: ClusterNode, latest: Map<string, Remediation>) {
  const { role: _role, capacity: _capacity, ...rest } = n;
  const r = latest.get(n.instance_id);
  return { ...rest, ...(r ? { latest_remediation: r } : {}) };
}

export function toCluster(row: ClusterRow, volumes: VolumeRow[], latest: Map<string, Remediation>) {
  const s = row.state;
  const spec = s.spec;
  const iso = (d: Date | null | undefined) => (d ? new Date(d).toISOString() : undefined);
  return {
    cluster_id: row.id,
    cluster_type: spec.cluster_type,
    region: spec.region,
    gpu_type: spec.gpu_type,
    cluster_name: spec.cluster_name,
    ...(spec.duration_days !== undefined ? { duration_hours: spec.duration_days * 24 } : {}),
    volumes: volumes.map((v) => ({ volume_id: v.id, volume_name: v.name, size_tib: v.size_tib, status: v.status })),
    status: STATUS_OF_PHASE[s.phase],
    control_plane_nodes: s.control_plane_nodes.map((n) => ({
      node_id: n.node_id,
      status: n.status,
      host_name: n.host_name,
      num_cpu_cores: n.num_cpu_cores,
      memory_gib: n.memory_gib,
      network: n.networks[0] ?? '',
      phase_transitions: n.phase_transitions,
    })),
    gpu_worker_nodes: s.gpu_worker_nodes.map((n) => workerNode(n, latest)),
    // Base64 of the kubeconfig YAML, as the official CLI decodes it; GET .../credentials has the YAML.
    kube_config: Buffer.from(row.kube_config ?? '', 'utf8').toString('base64'),
    num_gpus: s.counts.num_gpus,
    ...(spec.slurm_shm_size_gib !== undefined ? { slurm_shm_size_gib: spec.slurm_shm_size_gib } : {}),
    ...(spec.capacity_pool_id ? { capacity_pool_id: spec.capacity_pool_id } : {}),
    ...(spec.reservation_start_time ? { reservation_start_time: spec.reservation_start_time } : {}),
    ...(spec.reservation_end_time ? { reservation_end_time: spec.reservation_end_time } : {}),
    ...(spec.install_traefik !== undefined ? { install_traefik: spec.install_traefik } : {}),
    cuda_version: spec.cuda_version,
    nvidia_driver_version: spec.nvidia_driver_version,
    created_at: iso(row.created_at),
    ...(spec.oidc_config ? { oidc_config: spec.oidc_config as never } : {}),
    project_id: row.project_id,
    ...(spec.cluster_config ? { cluster_config: spec.cluster_config as never } : {}),
    num_cpu_workers: 0,
    phase_transitions: s.phase_transitions,
    desired_preemptible_gpus: s.counts.desired_preemptible_gpus,
    allocated_preemptible_gpus: s.allocated_preemptible_gpus,
    billing_type: spec.billing_type,
    // Add-ons are installed with the cluster: they show once provisioning is over.
    add_ons: spec.add_ons
      .filter((a) => s.provisioned && a.config[a.add_on_type]?.enabled === true)
      .map((a) => ({ name: a.name, add_on_type: a.add_on_type, config: a.config, state: { [a.add_on_type]: {} } })),
    ...(s.first_ready_at ? { first_ready_at: s.first_ready_at } : {}),
    control_plane_ready: s.control_plane_ready,
    os_image: spec.os_image,
    nvidia_driver_version_id: spec.nvidia_version_id,
    num_capacity_pool_gpus: s.counts.num_capacity_pool_gpus,
    num_reserved_gpus: s.counts.num_reserved_gpus,
    deleted_gpu_worker_nodes: s.deleted_gpu_worker_nodes.map((n) => workerNode(n, latest)),
    node_lifecycle_events: s.node_lifecycle_events,
    auto_scale: spec.auto_scale,
    ...(spec.auto_scale_max_gpus !== undefined ? { auto_scale_max_gpus: spec.auto_scale_max_gpus } : {}),
    ...(s.deleted_at ? { deleted_at: s.deleted_at } : {}),
  };
}

/** A shared storage volume (`/compute/clusters/storage/volumes`). */
export const toVolume = (v: VolumeRow) => ({
  volume_id: v.id,
  volume_name: v.name,
  size_tib: v.size_tib,
  status: v.status,
  region: v.region,
  is_lifecycle_independent: v.is_lifecycle_independent,
  ...(v.cluster_id ? { cluster_id: v.cluster_id } : {}),
});
