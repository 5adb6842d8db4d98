/** The inference gateway process: `npm run gateway` (started by `./dev up`). */
import { loadConfig, requireDatabaseUrl } from '../platform/config';
import { exitOnStartupError, ownerOnlyFiles, onShutdownSignal, retryUntilReady } from '../platform/lifecycle';
import { createLogger } from '../platform/logger';
import { createPool } from '../db/pool';
import { PrincipalCache } from '../db/principal-cache';
import { listen } from '../api/listen';
import { createGatewayHandler } from './app';
import { createHttpMetrics, serveMetrics } from '../api/metrics';

async function main() {
  ownerOnlyFiles();
  const config = loadConfig();
  const logger = createLogger('gateway', config.logLevel);
  const db = createPool(requireDatabaseUrl(config));
  await retryUntilReady('PostgreSQL', () => db.query('SELECT 1'), logger);
  const principals = new PrincipalCache(db, requireDatabaseUrl(config), logger);
  await principals.start();
  const metrics = createHttpMetrics('gateway');
  const app = createGatewayHandler({ config, db, logger, principals, metrics });
  const http = await listen(app, config.gatewayPort, config.host);
  logger.info({ url: `http://${config.host}:${config.gatewayPort}` }, 'inference gateway listening');
  const metricsServer = config.metricsPort
    ? await serveMetrics(metrics.registry, config.metricsPort, config.host)
    : undefined;
  onShutdownSignal(logger, async () => {
    await http.close();
    metricsServer?.close();
    await principals.stop();
    await db.end();
  });
}

main().catch(exitOnStartupError(createLogger('gateway')));
