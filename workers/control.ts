/**
 * The control worker: every workflow, and the activities that need no
 * accelerator, on task queue `control`. SIGINT/SIGTERM drain it: polling stops,
 * in-flight activities get the shutdown grace time, then are handed back to
 * Temporal (cancelled and retried elsewhere). With GANTRY_CONTAINER_RUNTIME it is
 * also a container host (container-host-workers.ts), as under `./dev up`; a
 * container host can also run alone (container-host.ts).
 */
import { Connection } from '@temporalio/client';
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { ensureSearchAttributes, temporalConnectionOptions } from '../platform/temporal';
import { exitOnStartupError, ownerOnlyFiles, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { bindStoredValuesOnce } from '../db/sealed-values';
import { LocalFleet } from '../providers/compute/local-fleet';
import { startBlobDeletionRetries } from '../providers/storage/blob-deletions';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import { startContainerHost } from './container-host-workers';
import { connectWorkerConnection, createControlWorker, installRuntime } from './runtime';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('worker-control', config.logLevel);
  installRuntime(logger, { host: config.host, port: config.metricsPort });
  const db = createPool(requireDatabaseUrl(config));
  await retryUntilReady('PostgreSQL', () => migrate(db), logger);
  await bindStoredValuesOnce(db, config.keyring, logger);
  const connection = await connectWorkerConnection(config, logger);
  // The workflows here set Gantry's search attributes: an upgraded worker that starts before the
  // API must not run them against a namespace that lacks a new attribute (the API registers too).
  const operator = await Connection.connect(temporalConnectionOptions(config.temporal));
  try {
    // As in the API: a server that takes connections may still be starting its services.
    const added = await retryUntilReady(
      `Temporal namespace ${config.temporal.namespace}`,
      () => ensureSearchAttributes(operator, config.temporal.namespace),
      logger,
    );
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
    modelCalls: { apiUrl: config.publicUrl, gatewayUrl: config.gatewayUrl },
    batchConcurrency: config.batchConcurrencyPerProject,
  });
  const host = await startContainerHost({ config, logger, connection, db, blobs });
  const blobDeletions = startBlobDeletionRetries({ db, blobs, everySeconds: config.blobDeletionRetrySeconds, logger });
  logger.info(
    { taskQueue: 'control', containerRuntime: config.containerRuntime },
    host ? `control worker polling; container host with the ${host.runtime.kind} runtime` : 'control worker polling',
  );
  // resolves after a shutdown signal has drained the workers
  await Promise.all([worker.run(), ...(host?.workers ?? []).map((w) => w.run())]);
  await host?.finish();
  await blobDeletions.stop();
  await connection.close();
  await db.end();
  logger.info('control worker stopped');
}

main().catch(exitOnStartupError(createLogger('worker-control')));
