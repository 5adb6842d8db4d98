/**
 * What one replica of a container host gets: the CPUs, memory and writable storage its deployment
 * asks for, or the host's defaults where it asks for none (GANTRY_REPLICA_DEFAULT_*), and never
 * more than the ceilings (GANTRY_REPLICA_MAX_*). The API refuses a deployment that asks for more
 * (api/use-cases/replica-ceilings.ts); the ceiling here holds a deployment made before a ceiling
 * was lowered, or before there were any, to it as well.
 */
import type { ReplicaLimits } from '../../platform/config';
import type { ReplicaToLaunch } from './runtime';

export function replicaLimits(
  r: Pick<ReplicaToLaunch, 'cpu' | 'memoryGiB' | 'storageGiB'>,
  defaults: ReplicaLimits,
  max: ReplicaLimits,
): ReplicaLimits {
  return {
    cpus: Math.min(r.cpu ?? defaults.cpus, max.cpus),
    memoryGiB: Math.min(r.memoryGiB ?? defaults.memoryGiB, max.memoryGiB),
    storageGiB: Math.min(r.storageGiB ?? defaults.storageGiB, max.storageGiB),
  };
}
