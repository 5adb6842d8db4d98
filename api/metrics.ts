/**
 * Prometheus metrics of an API or gateway process: requests, latency and
 * errors by route (the route's pattern, e.g. `/v1/fine-tunes/:id`, never the
 * raw path, so ids do not multiply the series), plus Node's own process
 * metrics. Served on a port of its own (GANTRY_METRICS_PORT) that only the
 * scraper should reach: metrics carry no tenant data, but they are not an API.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

export interface HttpMetrics {
  registry: Registry;
  middleware: (req: Request, res: Response, next: NextFunction) => void;
  /** Counts and times one response of a server without Express (the gateway): `routeOf` is read when it finishes. */
  track: (method: string, res: ServerResponse, routeOf: () => string) => void;
}

/** The route label of requests no route took (unknown paths, failed authentication). */
export const UNMATCHED_ROUTE = 'unmatched';

export function createHttpMetrics(service: 'api' | 'gateway'): HttpMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'gantry_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const errors = new Counter({
    name: 'gantry_http_request_errors_total',
    help: 'HTTP requests answered with a 4xx or 5xx status, by route pattern and status class',
    labelNames: ['method', 'route', 'class'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'gantry_http_request_duration_seconds',
    help: 'Time from a request arriving to its response finishing, by route pattern',
    labelNames: ['method', 'route'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const track = (method: string, res: ServerResponse, routeOf: () => string) => {
    const started = performance.now();
    // 'finish' comes at most once (never for a caller who left), so no once-wrapper is needed.
    res.on('finish', () => {
      const route = routeOf();
      const status = res.statusCode;
      duration.observe({ method, route }, (performance.now() - started) / 1000);
      requests.inc({ method, route, status: String(status) });
      if (status >= 400) errors.inc({ method, route, class: `${Math.floor(status / 100)}xx` });
    });
  };
  const middleware = (req: Request, res: Response, next: NextFunction) => {
    // The matched route's pattern (set by api/route.ts, or Express's own for plain routes);
    // requests no route took (unknown paths, failed authentication) share one label.
    track(
      req.method,
      res,
      () =>
        (res.locals.routePattern as string | undefined) ??
        (req.route?.path ? `${req.baseUrl}${String(req.route.path)}` : UNMATCHED_ROUTE),
    );
    next();
  };
  return { registry, middleware, track };
}

/** Serves `GET /metrics` in Prometheus text format on its own port. */
export async function serveMetrics(registry: Registry, port: number, host: string): Promise<Server> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: Error) => res.writeHead(500).end(err.message),
    );
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  return server;
}
