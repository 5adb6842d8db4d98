/**
 * The control worker: every workflow, and the activities that need no
 * accelerator, on task queue `control`. SIGINT/SIGTERM drain it: polling stops,
 * in-flight activities get the shutdown grace time, then are handed back to
 * Temporal (cancelled and retried elsewhere).
 */
import { loadConfig, requireDatabaseUrl } from '../common/config';
import { exitOnStartupError, retryUntilReady } from '../common/lifecycle';
import { createLogger } from '../common/logger';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { LocalFleet } from '../providers/compute/local-fleet';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import path from 'node:path';
import { VolumeStore } from '../providers/containers/volume-store';
import { ProcessRuntime } from '../providers/containers/process-runtime';
import { connectWorkerConnection, createContainerWorkers, createControlWorker, installRuntime } from './runtime';

async function main() {
  const config = loadConfig();
  const logger = createLogger('worker-control', config.logLevel);
  installRuntime(logger, { host: config.host, port: config.metricsPort });
  const db = createPool(requireDatabaseUrl(config));
  await retryUntilReady('PostgreSQL', () => migrate(db), logger);
  const connection = await connectWorkerConnection(config, logger);
  const blobs = new FilesystemBlobStore(config.blobDir);
  const worker = await createControlWorker({
    connection,
    namespace: config.temporal.namespace,
    shutdownGraceSeconds: config.workerShutdownGraceSeconds,
    db,
    blobs,
    remoteFetch: config.remoteFetch,
    signingSecret: config.signingSecret,
    fleet: new LocalFleet(db, config.fleetStepMs),
  });
  const runtime =
    config.containerRuntime === 'process' ? new ProcessRuntime(path.join(config.dataDir, 'deployments')) : null;
  const containers = runtime
    ? await createContainerWorkers({
        connection,
        namespace: config.temporal.namespace,
        shutdownGraceSeconds: config.workerShutdownGraceSeconds,
        db,
        runtime,
        volumes: new VolumeStore(path.join(config.dataDir, 'deployment-volumes'), blobs),
        signingSecret: config.signingSecret,
      })
    : [];
  logger.info(
    { taskQueue: 'control', containerRuntime: config.containerRuntime },
    runtime
      ? 'control worker polling; container host with the process runtime (no isolation)'
      : 'control worker polling',
  );
  // resolves after a shutdown signal has drained the workers
  await Promise.all([worker.run(), ...containers.map((w) => w.run())]);
  await runtime?.stopAll();
  await connection.close();
  await db.end();
  logger.info('control worker stopped');
}

main().catch(exitOnStartupError(createLogger('worker-control')));
