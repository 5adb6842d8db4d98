/**
 * A container host on its own: only the container queues (`containers` and
 * `containers@<host>`), none of the control queue's work. The docker-compose
 * `container-host` service runs this: Podman needs it to be root, and a root,
 * privileged process should not also tokenize tenants' files, fetch their URLs
 * or write blobs that the other workers (another user) must read. `./dev up`
 * runs the container host inside its one control worker instead (control.ts).
 */
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { exitOnStartupError, ownerOnlyFiles, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { bindStoredValuesOnce } from '../db/sealed-values';
import { FilesystemBlobStore } from '../providers/storage/filesystem';
import { startContainerHost } from './container-host-workers';
import { connectWorkerConnection, installRuntime } from './runtime';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('container-host', config.logLevel);
  if (config.containerRuntime === 'none')
    throw new Error(
      'a container host needs GANTRY_CONTAINER_RUNTIME (podman, or process with GANTRY_SINGLE_TENANT=yes)',
    );
  installRuntime(logger, { host: config.host, port: config.metricsPort });
  const db = createPool(requireDatabaseUrl(config));
  await retryUntilReady('PostgreSQL', () => migrate(db), logger);
  await bindStoredValuesOnce(db, config.keyring, logger);
  const connection = await connectWorkerConnection(config, logger);
  const host = await startContainerHost({
    config,
    logger,
    connection,
    db,
    blobs: new FilesystemBlobStore(config.blobDir),
  });
  if (!host) throw new Error('unreachable: the runtime is not none');
  logger.info(
    { containerRuntime: config.containerRuntime },
    `container host polling with the ${host.runtime.kind} runtime`,
  );
  // resolves after a shutdown signal has drained the workers
  await Promise.all(host.workers.map((w) => w.run()));
  await host.finish();
  await connection.close();
  await db.end();
  logger.info('container host stopped');
}

main().catch(exitOnStartupError(createLogger('container-host')));
