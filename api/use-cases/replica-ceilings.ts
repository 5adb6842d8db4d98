/**
 * The most one replica may have (GANTRY_REPLICA_MAX_CPUS, …_MEMORY_GIB, …_STORAGE_GIB): a deploy, a
 * change or a rollback whose spec asks for more is refused with a 400 naming the field, so that no
 * tenant's replica takes a host's CPUs, memory or disk from the others. A container host holds
 * every replica to the same ceilings whatever its deployment says (providers/containers/replica-limits.ts).
 */
import type { ReplicaLimits } from '../../platform/config';
import type { DeploymentSpec } from '../../shared/deployments';
import { badRequest } from '../errors';

/** Refuses a spec (or the part of one a change sets) that asks for more than a replica may have. */
export function requireWithinReplicaCeilings(
  spec: Pick<Partial<DeploymentSpec>, 'cpu' | 'memory' | 'storage'>,
  max: ReplicaLimits,
): void {
  const fields = [
    { param: 'cpu', asked: spec.cpu, most: max.cpus, unit: 'CPUs' },
    { param: 'memory', asked: spec.memory, most: max.memoryGiB, unit: 'GiB of memory' },
    { param: 'storage', asked: spec.storage, most: max.storageGiB, unit: 'GiB of storage' },
  ];
  for (const f of fields) {
    if (f.asked !== undefined && f.asked > f.most)
      throw badRequest(
        `${f.param} is ${f.asked}; a replica may have at most ${f.most} ${f.unit} here.`,
        f.param,
        'replica_ceiling_exceeded',
      );
  }
}
