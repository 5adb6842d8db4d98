/** `gantry clusters`: regions, create, list, get, update, delete, credentials (kubeconfig). */
import { writeFileSync } from 'node:fs';
import { InvalidArgumentError, type Command } from 'commander';
import { BILLING_TYPES, CLUSTER_TYPES } from '../../shared/clusters';
import { GPU_TYPES } from '../../shared/gpu-types';
import { context, int, jsonObject, oneOf } from '../context';
import { usageError } from '../errors';
import { details, print, table, time, yesNo } from '../output';

type Cluster = Record<string, any>;

const clusterPath = (id: string) => `/v1/compute/clusters/${encodeURIComponent(id)}`;
const multipleOf8 = (raw: string) => {
  const n = int(0)(raw);
  if (n % 8 !== 0) throw new InvalidArgumentError('must be a multiple of 8.');
  return n;
};

function clusterDetails(c: Cluster): string {
  const last = c.phase_transitions?.at(-1);
  return details([
    ['ID', c.cluster_id],
    ['Name', c.cluster_name],
    ['Status', c.status],
    ['Phase', last ? `${String(last.phase).replace('CLUSTER_PHASE_', '')} since ${time(last.transition_time)}` : '-'],
    ['Type', c.cluster_type],
    ['Region', c.region],
    [
      'GPUs',
      `${c.num_gpus} x ${c.gpu_type} (reserved ${c.num_reserved_gpus}, capacity pool ${c.num_capacity_pool_gpus})`,
    ],
    ['Preemptible GPUs', `${c.allocated_preemptible_gpus} of ${c.desired_preemptible_gpus} allocated`],
    ['GPU worker nodes', c.gpu_worker_nodes?.length],
    ['Control plane nodes', c.control_plane_nodes?.length],
    ['Billing', c.billing_type],
    ['CUDA / driver', `${c.cuda_version} / ${c.nvidia_driver_version}`],
    ['Autoscaling', c.auto_scale ? `up to ${c.auto_scale_max_gpus} GPUs` : 'no'],
    [
      'Volumes',
      (c.volumes ?? []).map((v: any) => `${v.volume_name} (${v.volume_id}, ${v.size_tib} TiB, ${v.status})`).join(', '),
    ],
    ['Kubeconfig', yesNo(!!c.kube_config)],
    ['Created', time(c.created_at)],
    ...(c.deleted_at ? ([['Deleted', time(c.deleted_at)]] as [string, string][]) : []),
  ]);
}

interface CreateOptions {
  name: string;
  region: string;
  gpuType: string;
  numGpus: number;
  billingType: string;
  clusterType?: string;
  nvidiaVersionId?: string;
  cudaVersion?: string;
  nvidiaDriverVersion?: string;
  durationDays?: number;
  numReservedGpus?: number;
  numCapacityPoolGpus?: number;
  capacityPoolId?: string;
  numPreemptibleGpus?: number;
  autoScale?: boolean;
  autoScaleMaxGpus?: number;
  slurmShmSizeGib?: number;
  reservationStartTime?: string;
  reservationEndTime?: string;
  installTraefik?: boolean;
  volumeId?: string;
  sharedVolumeName?: string;
  sharedVolumeSizeTib?: number;
  autoRemediation?: boolean;
  extra?: Record<string, unknown>;
}

export function addClusterCommands(program: Command) {
  const clusters = program.command('clusters').description('GPU clusters');

  clusters
    .command('regions')
    .description('Regions, their GPU types and driver/CUDA images (nvidia_version_id)')
    .action(async (_o, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.get('/v1/compute/regions');
      out.result(res, () =>
        print(
          table(
            ['region', 'GPU types', 'nvidia_version_id', 'CUDA', 'driver', 'OS'],
            res.regions.flatMap((r: any) =>
              (r.driver_versions ?? []).map((d: any) => [
                r.name,
                r.supported_instance_types.join(', '),
                d.id,
                d.cuda_version,
                d.nvidia_driver_version,
                d.os,
              ]),
            ),
          ),
        ),
      );
    });

  clusters
    .command('create')
    .description('Create a GPU cluster')
    .requiredOption('--name <name>', 'cluster name')
    .requiredOption('--region <region>', 'a region from `gantry clusters regions`')
    .requiredOption('--gpu-type <type>', GPU_TYPES.join(', '), oneOf(...GPU_TYPES))
    .requiredOption('--num-gpus <n>', 'GPU workers, a multiple of 8', multipleOf8)
    .option('--billing-type <type>', BILLING_TYPES.join(', '), oneOf(...BILLING_TYPES), 'ON_DEMAND')
    .option('--cluster-type <type>', CLUSTER_TYPES.join(', '), oneOf(...CLUSTER_TYPES))
    .option('--nvidia-version-id <id>', "the region's driver/CUDA image (preferred)")
    .option('--cuda-version <v>', 'legacy: with --nvidia-driver-version instead of --nvidia-version-id')
    .option('--nvidia-driver-version <v>', 'legacy: with --cuda-version')
    .option('--duration-days <n>', 'RESERVED: length of the reservation', int(1))
    .option('--num-reserved-gpus <n>', 'prepaid GPUs (RESERVED)', multipleOf8)
    .option('--num-capacity-pool-gpus <n>', 'GPUs from the capacity pool', multipleOf8)
    .option('--capacity-pool-id <id>', 'create from a capacity pool')
    .option('--num-preemptible-gpus <n>', 'preemptible GPUs, fulfilled as capacity allows', multipleOf8)
    .option('--auto-scale', 'scale GPU workers between --num-gpus and --auto-scale-max-gpus')
    .option('--auto-scale-max-gpus <n>', 'upper bound with --auto-scale', multipleOf8)
    .option('--slurm-shm-size-gib <n>', 'SLURM: shared memory size', int(1))
    .option('--reservation-start-time <iso>', 'SCHEDULED_CAPACITY: start (default: now)')
    .option('--reservation-end-time <iso>', 'SCHEDULED_CAPACITY: end')
    .option('--install-traefik', 'KUBERNETES: install Traefik')
    .option('--volume-id <id>', 'an existing shared volume')
    .option('--shared-volume-name <name>', 'create a shared volume with the cluster (with --shared-volume-size-tib)')
    .option('--shared-volume-size-tib <n>', 'size of the new shared volume', int(1))
    .option('--auto-remediation', 'repair nodes that fail a health check without waiting for approval')
    .option(
      '--extra <json|@file>',
      'more fields of the create request (oidc_config, cluster_config, add_ons, ...)',
      jsonObject,
    )
    .action(async (o: CreateOptions, cmd: Command) => {
      const { client, out } = context(cmd);
      if (!!o.sharedVolumeName !== (o.sharedVolumeSizeTib !== undefined))
        throw usageError('--shared-volume-name and --shared-volume-size-tib go together.');
      const body = {
        ...o.extra,
        cluster_name: o.name,
        region: o.region,
        gpu_type: o.gpuType,
        num_gpus: o.numGpus,
        billing_type: o.billingType,
        cluster_type: o.clusterType,
        nvidia_version_id: o.nvidiaVersionId,
        cuda_version: o.cudaVersion,
        nvidia_driver_version: o.nvidiaDriverVersion,
        duration_days: o.durationDays,
        num_reserved_gpus: o.numReservedGpus,
        num_capacity_pool_gpus: o.numCapacityPoolGpus,
        capacity_pool_id: o.capacityPoolId,
        num_preemptible_gpus: o.numPreemptibleGpus,
        auto_scale: o.autoScale,
        auto_scale_max_gpus: o.autoScaleMaxGpus,
        slurm_shm_size_gib: o.slurmShmSizeGib,
        reservation_start_time: o.reservationStartTime,
        reservation_end_time: o.reservationEndTime,
        install_traefik: o.installTraefik,
        volume_id: o.volumeId,
        shared_volume: o.sharedVolumeName
          ? { volume_name: o.sharedVolumeName, size_tib: o.sharedVolumeSizeTib, region: o.region }
          : undefined,
        auto_remediation_enabled: o.autoRemediation,
      };
      const c = await client.post<Cluster>('/v1/compute/clusters', JSON.parse(JSON.stringify(body)));
      out.result(c, () => print(clusterDetails(c)));
    });

  clusters
    .command('list')
    .description("The project's clusters")
    .action(async (_o, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.get<{ clusters: Cluster[] }>('/v1/compute/clusters');
      out.result(res, () =>
        print(
          res.clusters.length
            ? table(
                ['id', 'name', 'status', 'GPUs', 'region', 'billing', 'created', 'deleted'],
                res.clusters.map((c) => [
                  c.cluster_id,
                  c.cluster_name,
                  c.status,
                  `${c.num_gpus} x ${c.gpu_type}`,
                  c.region,
                  c.billing_type,
                  time(c.created_at),
                  time(c.deleted_at),
                ]),
              )
            : 'No clusters.',
        ),
      );
    });

  clusters
    .command('get')
    .alias('retrieve')
    .description('A cluster')
    .argument('<cluster-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const c = await client.get<Cluster>(clusterPath(id));
      out.result(c, () => print(clusterDetails(c)));
    });

  clusters
    .command('update')
    .description('Resize a cluster or change its preemptible GPUs')
    .argument('<cluster-id>')
    .option('--num-gpus <n>', 'GPU workers, a multiple of 8', multipleOf8)
    .option('--num-reserved-gpus <n>', 'prepaid GPUs (RESERVED only)', multipleOf8)
    .option('--num-capacity-pool-gpus <n>', 'capacity-pool GPUs (clusters from a pool only)', multipleOf8)
    .option('--num-preemptible-gpus <n>', 'preemptible GPUs', multipleOf8)
    .option('--reservation-end-time <iso>', 'new reservation end')
    .option('--extra <json|@file>', 'more fields of the update request (cluster_config, add_ons, ...)', jsonObject)
    .action(async (id: string, o: Record<string, any>, cmd: Command) => {
      const { client, out } = context(cmd);
      const body = JSON.parse(
        JSON.stringify({
          ...o.extra,
          num_gpus: o.numGpus,
          num_reserved_gpus: o.numReservedGpus,
          num_capacity_pool_gpus: o.numCapacityPoolGpus,
          num_preemptible_gpus: o.numPreemptibleGpus,
          reservation_end_time: o.reservationEndTime,
        }),
      );
      if (!Object.keys(body).length) throw usageError('Nothing to update: give at least one option.');
      const c = await client.put<Cluster>(clusterPath(id), body);
      out.result(c, () => print(clusterDetails(c)));
    });

  clusters
    .command('delete')
    .description('Delete a cluster: nodes are drained and released')
    .argument('<cluster-id>')
    .action(async (id: string, _o, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.delete(clusterPath(id));
      out.result(res, () => print(`Deleting ${res.cluster_id}.`));
    });

  clusters
    .command('credentials')
    .description("The cluster's kubeconfig (to stdout, or to a file with --output)")
    .argument('<cluster-id>')
    .option('-o, --output <path>', 'write the kubeconfig here (mode 0600)')
    .action(async (id: string, o: { output?: string }, cmd: Command) => {
      const { client, out } = context(cmd);
      const res = await client.request('GET', `${clusterPath(id)}/credentials`, {
        headers: { accept: 'application/yaml, application/json' },
      });
      const kubeconfig = await res.text();
      if (o.output) writeFileSync(o.output, kubeconfig, { mode: 0o600 });
      out.result({ cluster_id: id, kube_config: kubeconfig, ...(o.output ? { output: o.output } : {}) }, () =>
        o.output ? print(`Wrote ${o.output}.`) : process.stdout.write(kubeconfig),
      );
    });
}
