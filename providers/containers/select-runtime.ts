/**
 * The container runtime a container host runs, from GANTRY_CONTAINER_RUNTIME:
 * one place, so the control worker and `./dev up` agree on what each setting means.
 */
import type { RemoteFetchPolicy } from '../../platform/config';
import path from 'node:path';

import type { Logger } from 'pino';
import type { ReplicaLimits } from '../../platform/config';
import { PodmanEngine } from './podman/podman-engine';
import { PodmanRuntime } from './podman/podman-runtime';
import { ReplicaNetworks } from './podman/replica-networks';
import { ProcessRuntime } from './process-runtime';
import type { ContainerRuntime } from './runtime';
import { replicaLogDir } from './replica-log';
import { platformImages } from '../../shared/model-server-image';

export async function selectContainerRuntime(
  config: {
    containerRuntime: 'podman' | 'process' | 'none';
    singleTenant: boolean;
    dataDir: string;
    containerHostId?: string;
    containerHostAddress: string;
    insecureRegistries: string[];
    imageRegistry?: string;
    modelServerImage?: string;
    torchModelServerImage?: string;
    replicaApiUrl: string;
    replicaDefaultLimits: ReplicaLimits;
    replicaMaxLimits: ReplicaLimits & { imageGiB: number };
    containerStorageGiB: number;
    remoteFetch: RemoteFetchPolicy;
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
      const engine = new PodmanEngine(path.join(config.dataDir, 'podman'), { storageGiB: config.containerStorageGiB });
      // Now rather than at the first replica: a host whose storage cannot bound replicas' disks says so at start.
      await engine.prepareStorage().catch((err: Error) => {
        throw new Error(`GANTRY_CONTAINER_RUNTIME=podman cannot run here: ${err.message}`);
      });
      const api = new URL(config.replicaApiUrl);
      // (An IPv6 hostname comes in brackets; the forwarder wants the address.)
      const target = {
        host: api.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: Number(api.port || (api.protocol === 'https:' ? 443 : 80)),
      };
      const runtime = new PodmanRuntime(logDir, engine, new ReplicaNetworks(engine, target), {
        hostId: config.containerHostId,
        insecureRegistries: config.insecureRegistries,
        limits: { defaults: config.replicaDefaultLimits, max: config.replicaMaxLimits },
        imageRegistry: config.imageRegistry,
        // The platform's own image: run from this host's copy for any project (shared/image-references.ts).
        platformImages: platformImages(config),
        address: config.containerHostAddress,
        // A tenant's registry is an outbound fetch like any other: public addresses only.
        allowPrivateRegistries: config.remoteFetch.allowPrivateHosts,
        logger,
      });
      // What a host that stopped, or Podman, left behind since this host last looked.
      void runtime.removeNetworkLeftovers();
      void runtime.removeLaunchLeftovers();
      return runtime;
    }
  }
}
