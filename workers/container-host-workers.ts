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
import { keptHostName, LiveHosts, newHostName } from '../providers/containers/host-identity';
import { STORE } from '../providers/containers/podman/container-storage';

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

/**
 * The name of a container host the operator did not name (GANTRY_CONTAINER_HOST_ID): the one its
 * data directory keeps, so that a host restarted after a crash is the same host, finds the
 * containers its last process left by their `gantry.host` label and adopts them, and their
 * deployments re-attach on its queue. If a process that still runs holds that name (a second host
 * on the same data directory), a name of this process's own: one process per name.
 */
function unnamedHostName(config: GantryConfig, logger: Logger): string {
  const kept = keptHostName(config.dataDir);
  // Podman's hosts share the machine's store, and claim their names for the machine; the process
  // runtime's replicas are kept per data directory (process-runtime.ts).
  const live = new LiveHosts(
    config.containerRuntime === 'podman' ? STORE.liveHosts : path.join(config.dataDir, 'container-hosts'),
  );
  if (!live.heldByAnother(kept)) {
    live.claim(kept);
    return kept;
  }
  const own = newHostName();
  logger.warn(
    { kept, host: own },
    'another container host process of this data directory runs under its name: this one is a new host each time (give each a GANTRY_CONTAINER_HOST_ID)',
  );
  return own;
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
  if (config.containerRuntime === 'none') return null;
  const hostId = config.containerHostId ?? unnamedHostName(config, logger);
  const runtime = await selectContainerRuntime({ ...config, containerHostId: hostId }, logger);
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
    modelDir: config.modelDir,
    hostId,
    restartsInPlace: config.containerHostId !== undefined,
  });
  const housekeeping = startHostHousekeeping({ runtime, stores, db, config, logger });
  return {
    runtime,
    workers,
    housekeeping,
    async finish() {
      await housekeeping.stop();
      // A host the operator named leaves its replicas to the next process, which adopts them (their
      // deployments re-attach); an unnamed one stops what it started (`./dev down` leaves nothing
      // running). Either adopts what a crash of its last process left (unnamedHostName).
      if (config.containerHostId) {
        runtime.release();
        logger.info({ host: config.containerHostId }, 'replicas left running for the next process of this host');
      } else await runtime.stopAll();
    },
  };
}
