/** The API process: `npm run api` (started by `./dev up`). */
import { Client, Connection } from '@temporalio/client';
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { exitOnStartupError, ownerOnlyFiles, onShutdownSignal, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { ensureSearchAttributes, temporalConnectionOptions } from '../platform/temporal';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { bindStoredValuesOnce } from '../db/sealed-values';
import { PrincipalCache } from '../db/principal-cache';
import { QueueWakeups } from '../db/queue-wakeups';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import { listen } from './listen';
import { createApp } from './app';
import { createHttpMetrics, serveMetrics } from './metrics';
import { ensureUsageMeteringSchedule } from './usage-schedule';
import { ensureServerlessPools } from './serverless-pools';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('api', config.logLevel);
  const db = createPool(requireDatabaseUrl(config));
  const applied = await retryUntilReady('PostgreSQL', () => migrate(db), logger);
  if (applied.length) logger.info({ applied }, 'migrations applied');
  await bindStoredValuesOnce(db, config.keyring, logger);

  const connection = await retryUntilReady(
    `Temporal at ${config.temporal.address}`,
    () => Connection.connect(temporalConnectionOptions(config.temporal)),
    logger,
  );
  const temporal = new Client({ connection, namespace: config.temporal.namespace });
  // A server that takes connections may still be starting its services (a fresh docker-compose
  // Temporal answered "Not enough hosts to serve the request" to the schedule's creation).
  await retryUntilReady(
    `Temporal namespace ${config.temporal.namespace}`,
    async () => {
      await ensureSearchAttributes(connection, config.temporal.namespace);
      await ensureUsageMeteringSchedule(temporal, config.usageMeterSeconds, logger);
    },
    logger,
  );

  // The platform's serverless pools: a failure is logged, and leaves the rest of the API serving
  // (serverless calls answer 404 for models without a pool; the next start tries again).
  await ensureServerlessPools({ db, temporal, config, logger }).then(
    (pools) => logger.info({ pools }, 'serverless pools in place'),
    (err: unknown) => logger.error({ err: (err as Error).message }, 'serverless pools not made'),
  );

  if (!config.keyring) {
    logger.warn('GANTRY_SIGNING_SECRET is not set: pre-signed upload URLs (POST /v1/files) are refused');
  }
  const principals = new PrincipalCache(db, requireDatabaseUrl(config), logger);
  await principals.start();
  const queueWakeups = new QueueWakeups(requireDatabaseUrl(config), logger);
  await queueWakeups.start();
  const metrics = createHttpMetrics('api');
  const app = createApp({
    config,
    db,
    temporal,
    logger,
    blobs: new FilesystemBlobStore(config.blobDir),
    principals,
    queueWakeups,
    metrics,
  });
  const http = await listen(app, config.apiPort, config.host);
  logger.info({ url: `http://${config.host}:${config.apiPort}` }, 'API listening');
  const metricsServer = config.metricsPort
    ? await serveMetrics(metrics.registry, config.metricsPort, config.host)
    : undefined;
  if (config.metricsPort) logger.info({ url: `http://${config.host}:${config.metricsPort}/metrics` }, 'API metrics');

  onShutdownSignal(logger, async () => {
    // Stop accepting, let in-flight requests finish, then release connections.
    await http.close();
    metricsServer?.close();
    await principals.stop();
    await queueWakeups.stop();
    await db.end();
    await connection.close();
  });
}

main().catch(exitOnStartupError(createLogger('api')));
