/**
 * The workers of a container host, and what becomes of its replicas when they stop: shared by
 * the control worker (which is also the container host under `./dev up`) and by the container
 * host on its own (container-host.ts, docker-compose).
 */
import path from 'node:path';

import type { NativeConnection, Worker } from '@temporalio/worker';
import type { Logger } from 'pino';
import type { GantryConfig } from '../platform/config';
import type { Db } from '../db/pool';
import type { BlobStore } from '../providers/storage/blob-store';
import type { ContainerRuntime } from '../providers/containers/runtime';
import { selectContainerRuntime } from '../providers/containers/select-runtime';
import { AdapterFiles } from '../providers/containers/adapter-files';
import { VolumeStore } from '../providers/containers/volume-store';
import { startHostHousekeeping, type HostHousekeeping } from '../providers/containers/host-housekeeping';
import { createContainerWorkers } from './runtime';

export interface ContainerHost {
  runtime: ContainerRuntime;
  workers: Worker[];
  /** Removes the files of volumes, models, adapters and replica logs nothing has used for a while; rotates logs. */
  housekeeping: HostHousekeeping;
  /** After the workers have drained: leave the replicas to the next process of a named host, or stop them. */
  finish(): Promise<void>;
}

/** Where a container host keeps the files its replicas mount: volumes and model revisions, and adapters. */
export function hostFileStores(dataDir: string, blobs: BlobStore): { volumes: VolumeStore; adapters: AdapterFiles } {
  return {
    volumes: new VolumeStore(path.join(dataDir, 'deployment-volumes'), blobs),
    adapters: new AdapterFiles(path.join(dataDir, 'deployment-adapters'), blobs),
  };
}

/** The container host this process's configuration asks for, or null with GANTRY_CONTAINER_RUNTIME=none. */
export async function startContainerHost({
  config,
  logger,
  connection,
  db,
  blobs,
}: {
  config: GantryConfig;
  logger: Logger;
  connection: NativeConnection;
  db: Db;
  blobs: BlobStore;
}): Promise<ContainerHost | null> {
  const runtime = await selectContainerRuntime(config, logger);
  if (!runtime) return null;
  const stores = hostFileStores(config.dataDir, blobs);
  const workers = await createContainerWorkers({
    connection,
    namespace: config.temporal.namespace,
    shutdownGraceSeconds: config.workerShutdownGraceSeconds,
    db,
    runtime,
    ...stores,
    keyring: config.keyring,
    replicaAdoptionSeconds: config.replicaAdoptionSeconds,
    hostId: config.containerHostId,
  });
  const housekeeping = startHostHousekeeping({ runtime, stores, db, config, logger });
  return {
    runtime,
    workers,
    housekeeping,
    async finish() {
      await housekeeping.stop();
      // A host that keeps its name across restarts leaves its replicas to the next process, which
      // adopts them (their deployments re-attach); a host that is new each time stops what it started.
      if (config.containerHostId) {
        runtime.release();
        logger.info({ host: config.containerHostId }, 'replicas left running for the next process of this host');
      } else await runtime.stopAll();
    },
  };
}
