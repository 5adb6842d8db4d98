/**
 * The inference gateway ({inference_url}/v1/...): routes inference calls to
 * endpoint replicas. It authenticates like the API. Today it proxies requests to
 * dedicated endpoints (inference.ts: chat completions and completions
 * by endpoint string) and to container deployments (proxy.ts). Every
 * other path is a 404 in the spec's shape.
 */
import express from 'express';
import type { ApiDeps } from '../api/deps';
import { authenticate, principalLookup } from '../api/middleware/auth';
import { rateLimits, trustProxy } from '../api/middleware/rate-limit';
import { errorHandler, routeNotFound } from '../api/middleware/errors';
import { requestLogging } from '../api/middleware/request-context';
import { deploymentProxy } from './proxy';
import { inferenceRoutes } from './inference';
import { RequestCounter } from './request-counter';
import { RouterStats } from './router-stats';
import { TokenUsage } from './token-usage';
import { createHttpMetrics } from '../api/metrics';

export function createGatewayApp(
  deps: Pick<ApiDeps, 'db' | 'logger' | 'config' | 'principals' | 'metrics'>,
): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Behind a reverse proxy, the per-address rate limit needs the client's address, not the proxy's.
  if (deps.config.trustProxy) app.set('trust proxy', trustProxy(deps.config.trustProxy));
  app.use((deps.metrics ?? createHttpMetrics('gateway')).middleware);
  app.use(requestLogging(deps.logger));
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // The same limits as the API: inference traffic is requests too.
  const limits = rateLimits(deps.config);
  app.use(limits.beforeAuth, authenticate(principalLookup(deps)), limits.afterAuth);
  const counter = new RequestCounter(deps.db);
  const stats = new RouterStats(deps.db);
  const tokens = new TokenUsage(deps.db, (err) =>
    deps.logger.warn({ err: err.message }, 'inference token usage not recorded yet; kept for the next flush'),
  );
  app.use(
    '/v1',
    inferenceRoutes(deps.db, { wakeTimeoutSeconds: deps.config.gatewayWakeTimeoutSeconds, counter, stats, tokens }),
  );
  app.use('/v1', deploymentProxy(deps.db, counter));
  app.use(routeNotFound);
  app.use(errorHandler);
  return app;
}
