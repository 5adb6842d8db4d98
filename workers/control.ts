/**
 * The control worker: every workflow, and the activities that need no
 * accelerator, on task queue `control`. SIGINT/SIGTERM drain it: polling stops,
 * in-flight activities get the shutdown grace time, then are handed back to
 * Temporal (cancelled and retried elsewhere).
 */
import { Connection } from '@temporalio/client';
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { ensureSearchAttributes, temporalConnectionOptions } from '../platform/temporal';
import { exitOnStartupError, ownerOnlyFiles, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { LocalFleet } from '../providers/compute/local-fleet';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import path from 'node:path';
import { VolumeStore } from '../providers/containers/volume-store';
import { selectContainerRuntime } from '../providers/containers/select-runtime';
import { connectWorkerConnection, createContainerWorkers, createControlWorker, installRuntime } from './runtime';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('worker-control', config.logLevel);
  installRuntime(logger, { host: config.host, port: config.metricsPort });
  const db = createPool(requireDatabaseUrl(config));
  await retryUntilReady('PostgreSQL', () => migrate(db), logger);
  const connection = await connectWorkerConnection(config, logger);
  // The workflows here set Gantry's search attributes: an upgraded worker that starts before the
  // API must not run them against a namespace that lacks a new attribute (the API registers too).
  const operator = await Connection.connect(temporalConnectionOptions(config.temporal));
  try {
    const added = await ensureSearchAttributes(operator, config.temporal.namespace);
    if (added.length) logger.info({ added }, 'search attributes registered');
  } finally {
    await operator.close();
  }
  const blobs = new FilesystemBlobStore(config.blobDir);
  const worker = await createControlWorker({
    connection,
    namespace: config.temporal.namespace,
    shutdownGraceSeconds: config.workerShutdownGraceSeconds,
    db,
    blobs,
    remoteFetch: config.remoteFetch,
    storageQuotaBytes: config.projectStorageQuotaBytes,
    keyring: config.keyring,
    fleet: new LocalFleet(db, config.fleetStepMs),
  });
  const runtime = await selectContainerRuntime(config, logger);
  const containers = runtime
    ? await createContainerWorkers({
        connection,
        namespace: config.temporal.namespace,
        shutdownGraceSeconds: config.workerShutdownGraceSeconds,
        db,
        runtime,
        volumes: new VolumeStore(path.join(config.dataDir, 'deployment-volumes'), blobs),
        keyring: config.keyring,
        replicaAdoptionSeconds: config.replicaAdoptionSeconds,
        hostId: config.containerHostId,
      })
    : [];
  logger.info(
    { taskQueue: 'control', containerRuntime: config.containerRuntime },
    runtime ? `control worker polling; container host with the ${runtime.kind} runtime` : 'control worker polling',
  );
  // resolves after a shutdown signal has drained the workers
  await Promise.all([worker.run(), ...containers.map((w) => w.run())]);
  // A host that keeps its name across restarts leaves its replicas to the next process, which
  // adopts them (their deployments re-attach); a host that is new each time stops what it started.
  if (runtime && config.containerHostId) {
    runtime.release();
    logger.info({ host: config.containerHostId }, 'replicas left running for the next process of this host');
  } else await runtime?.stopAll();
  await connection.close();
  await db.end();
  logger.info('control worker stopped');
}

main().catch(exitOnStartupError(createLogger('worker-control')));
