/**
 * The inference gateway ({inference_url}/v1/...): routes inference calls to
 * endpoint replicas. It authenticates and rate-limits like the API. It proxies
 * requests to dedicated endpoints and the platform's serverless pools
 * (inference.ts: chat completions and completions by endpoint string or
 * catalog model name) and to container deployments (proxy.ts). `GET /v1/models`
 * lists the serverless models in OpenAI's list shape, so an OpenAI SDK pointed
 * at the gateway lists what it can call by name there. Every other path is a
 * 404 in the spec's shape.
 *
 * A plain node:http handler, not an Express app: the gateway has three routes and
 * is on the path of every inference call, and Express's router and response
 * helpers were most of its own cost per proxied request (bench/gateway.ts). The
 * parts it shares with the API (authentication, rate limits, the error shape,
 * request logs and metrics) are the API's own, called directly.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import proxyaddr from 'proxy-addr';
import type { ApiDeps } from '../api/deps';
import { forbidden, notFound } from '../api/errors';
import { createHttpMetrics, UNMATCHED_ROUTE } from '../api/metrics';
import { bindPrincipalToLog, principalLookup, principalOf } from '../api/middleware/auth';
import { sendError } from '../api/middleware/errors';
import { sendJson } from '../api/json-response';
import { serverlessModelObjects } from '../api/presenters/model-catalog';
import { pooledServerlessModels } from '../api/serverless-pools';
import { compileTrustProxy, rateLimitChecks, serverlessRateLimit } from '../api/middleware/rate-limit';
import { requestLogging } from '../api/middleware/request-context';
import { deploymentProxy, type GatewayCall } from './proxy';
import { inferenceRoutes, type InferencePath } from './inference';
import { RequestCounter } from './request-counter';
import { RouterStats } from './router-stats';
import { TokenUsage } from './token-usage';
import { WorkTraffic } from './work-traffic';
import { KeptWorkCalls } from './kept-work-calls';

type GatewayDeps = Pick<ApiDeps, 'db' | 'logger' | 'config' | 'principals' | 'metrics'>;

/** How long a batch's call waits for a replica's interactive calls to finish before it goes anyway. */
const WORK_YIELD_MS = 2000;

const DEPLOYMENT_PATH = /^\/v1\/deployments\/([^/]+)(\/.*)?$/;
const INFERENCE_PATHS = new Map<string, InferencePath>([
  ['/v1/chat/completions', '/chat/completions'],
  ['/v1/completions', '/completions'],
]);

/** The gateway's request handler, for `http.createServer`. */
export function createGatewayHandler(deps: GatewayDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const metrics = deps.metrics ?? createHttpMetrics('gateway');
  const logRequest = requestLogging(deps.logger);
  // Behind a reverse proxy, the per-address rate limit needs the client's address, not the proxy's.
  const trust = compileTrustProxy(deps.config.trustProxy);
  // With no proxy trusted, the address is the socket's (what proxy-addr would answer, after parsing
  // X-Forwarded-For for nothing).
  const addressOf = deps.config.trustProxy
    ? (req: IncomingMessage) => proxyaddr(req, trust)
    : (req: IncomingMessage) => req.socket.remoteAddress ?? '';
  // The same limits as the API: inference traffic is requests too.
  const limits = rateLimitChecks(deps.config);
  const lookup = principalLookup(deps);
  const counter = new RequestCounter(deps.db);
  const stats = new RouterStats(deps.db);
  const tokens = new TokenUsage(deps.db, (err) =>
    deps.logger.warn({ err: err.message }, 'inference token usage not recorded yet; kept for the next flush'),
  );
  const infer = inferenceRoutes(deps.db, {
    wakeTimeoutSeconds: deps.config.gatewayWakeTimeoutSeconds,
    counter,
    stats,
    tokens,
    serverlessLimit: serverlessRateLimit(deps.config),
    work: new WorkTraffic({ perProject: deps.config.batchConcurrencyPerProject, yieldMs: WORK_YIELD_MS }),
    kept: new KeptWorkCalls(deps.db),
  });
  const proxy = deploymentProxy(deps.db, counter);

  async function serve(req: IncomingMessage, res: ServerResponse, route: { label: string }): Promise<void> {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    if (path === '/healthz' && (req.method === 'GET' || req.method === 'HEAD')) {
      route.label = '/healthz';
      return sendJson(res, 200, { status: 'ok' });
    }
    const clientAddress = addressOf(req);
    await limits.beforeAuth({ ip: clientAddress }, res);
    const principal = await principalOf(req.headers.authorization, lookup);
    bindPrincipalToLog(req, principal);
    await limits.afterAuth({ principal }, res);
    const call: GatewayCall = { req, res, principal, clientAddress };

    // One trailing slash is forgiven, as the Express app this replaced did.
    const routePath = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    const inference = INFERENCE_PATHS.get(routePath);
    if (inference && req.method === 'POST') {
      route.label = routePath;
      return infer(call, inference);
    }
    // A batch's or an evaluation's credential makes model calls, nothing else.
    if (principal.work) throw forbidden('A work credential only makes model calls.', 'work_credential_scope');
    if (routePath === '/v1/models' && req.method === 'GET') {
      route.label = routePath;
      const data = serverlessModelObjects(await pooledServerlessModels(deps.db));
      return sendJson(res, 200, { object: 'list', data: data.map((m) => ({ ...m, owned_by: m.organization })) });
    }
    const deployment = DEPLOYMENT_PATH.exec(path);
    if (deployment) {
      route.label = '/v1/deployments/:name/*';
      // The replica gets the rest of the path and the query as they came, still percent-encoded.
      return proxy(call, decodedName(deployment[1]), `${deployment[2] ?? '/'}${q < 0 ? '' : url.slice(q)}`);
    }
    throw notFound(`No route for ${req.method} ${path}.`, 'route_not_found');
  }

  return (req, res) => {
    const route = { label: UNMATCHED_ROUTE };
    metrics.track(req.method ?? 'GET', res, () => route.label);
    logRequest(req, res);
    serve(req, res, route).catch((err: unknown) => sendError(req, res, err));
  };
}

/** A deployment name from the path; one that does not decode names no deployment. */
function decodedName(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw notFound(`No deployment named '${segment}' in this project.`);
  }
}
