/**
 * The container runtime a container host runs, from GANTRY_CONTAINER_RUNTIME:
 * one place, so the control worker and `./dev up` agree on what each setting means.
 */
import path from 'node:path';

import type { Logger } from 'pino';
import { PodmanEngine } from './podman/podman-engine';
import { PodmanRuntime } from './podman/podman-runtime';
import { ReplicaNetworks } from './podman/replica-networks';
import { ProcessRuntime } from './process-runtime';
import type { ContainerRuntime } from './runtime';
import { replicaLogDir } from './replica-log';

export async function selectContainerRuntime(
  config: {
    containerRuntime: 'podman' | 'process' | 'none';
    singleTenant: boolean;
    dataDir: string;
    containerHostId?: string;
    containerHostAddress: string;
    insecureRegistries: string[];
    replicaApiUrl: string;
    replicaDefaultLimits: { cpus: number; memoryGiB: number };
  },
  logger: Logger,
): Promise<ContainerRuntime | null> {
  const logDir = replicaLogDir(config.dataDir);
  switch (config.containerRuntime) {
    case 'none':
      return null;
    case 'process':
      // A replica of this runtime has this worker's user and rights (its data directory, keys and
      // database are within reach): it starts only where the installation says it has one tenant.
      if (!config.singleTenant)
        throw new Error(
          'GANTRY_CONTAINER_RUNTIME=process runs every deployment as a host process with this ' +
            "worker's user and rights, and ignores images: it is for an installation of one trusted " +
            'tenant, which says so with GANTRY_SINGLE_TENANT=yes (it then runs one project). ' +
            'Tenants need GANTRY_CONTAINER_RUNTIME=podman.',
        );
      logger.warn(
        'SINGLE-TENANT (GANTRY_SINGLE_TENANT=yes): GANTRY_CONTAINER_RUNTIME=process runs deployments as host ' +
          "processes with this worker's user and rights, for one project only; tenants need GANTRY_CONTAINER_RUNTIME=podman.",
      );
      return new ProcessRuntime(logDir, config.containerHostId, config.containerHostAddress);
    case 'podman': {
      const why = await PodmanEngine.unavailable();
      if (why) throw new Error(`GANTRY_CONTAINER_RUNTIME=podman cannot run here: ${why}.`);
      const engine = new PodmanEngine(path.join(config.dataDir, 'podman'));
      const api = new URL(config.replicaApiUrl);
      // (An IPv6 hostname comes in brackets; the forwarder wants the address.)
      const target = {
        host: api.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: Number(api.port || (api.protocol === 'https:' ? 443 : 80)),
      };
      const runtime = new PodmanRuntime(logDir, engine, new ReplicaNetworks(engine, target), {
        hostId: config.containerHostId,
        insecureRegistries: config.insecureRegistries,
        defaultLimits: config.replicaDefaultLimits,
        address: config.containerHostAddress,
        logger,
      });
      // What a host that stopped, or Podman, left behind since this host last looked.
      void runtime.removeNetworkLeftovers();
      return runtime;
    }
  }
}
