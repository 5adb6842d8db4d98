/**
 * A GPU worker: activities that need an accelerator, on `gpu.<type>` for each
 * type in GANTRY_GPU_TYPES. On a host without NVIDIA GPUs it runs as a
 * simulated accelerator host and says so; the reference trainer runs on CPU.
 */
import path from 'node:path';
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { exitOnStartupError, ownerOnlyFiles, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { createPool } from '../db/pool';
import { detectAcceleratorHost } from '../providers/accelerator/host';
import { LocalFleet } from '../providers/compute/local-fleet';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import { connectWorkerConnection, createGpuWorkers, installRuntime } from './runtime';
import { gpuTaskQueue } from '../shared/task-queues';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('worker-gpu', config.logLevel);
  installRuntime(logger, { host: config.host, port: config.metricsPort });
  const host = await detectAcceleratorHost(config.accelerator);
  const db = createPool(requireDatabaseUrl(config));
  await retryUntilReady('PostgreSQL', () => db.query('SELECT 1'), logger);
  const connection = await connectWorkerConnection(config, logger);
  const workers = await createGpuWorkers({
    connection,
    namespace: config.temporal.namespace,
    shutdownGraceSeconds: config.workerShutdownGraceSeconds,
    gpuTypes: config.gpuTypes,
    host,
    db,
    blobs: new FilesystemBlobStore(config.blobDir),
    fleet: new LocalFleet(db, config.fleetStepMs),
    trainers: {
      reference: config.trainerPython,
      ...(config.torchTrainerPython ? { torch: config.torchTrainerPython } : {}),
    },
    modelDir: config.modelDir,
    workDir: path.join(config.dataDir, 'trainer-runs'),
    trainerStallSeconds: config.trainerStallSeconds,
    trainingSlots: config.trainingSlots,
  });
  logger.info(
    { taskQueues: config.gpuTypes.map(gpuTaskQueue), accelerator: host.kind },
    host.kind === 'simulated'
      ? 'GPU worker polling as a SIMULATED accelerator host (no physical GPU)'
      : 'GPU worker polling',
  );
  await Promise.all(workers.map((w) => w.run()));
  await connection.close();
  await db.end();
  logger.info('GPU worker stopped');
}

main().catch(exitOnStartupError(createLogger('worker-gpu')));
