/**
 * The gateway's proxy to container deployments: `{inference_url}/v1/deployments/<name>/<path>`
 * goes to one of the deployment's running replicas (round robin), with the
 * caller's API key removed. Every request is counted per second for the
 * HTTPTotalRequests autoscaler; a deployment with no running replica (scaled
 * to zero, or starting) answers 503 with Retry-After, and the counted request
 * is what makes the autoscaler start one.
 */
import { Agent, request as httpRequest } from 'node:http';
import express, { type Request, type Response } from 'express';
import { findDeploymentByName, runningReplicaPorts } from '../db/deployments';
import type { Db } from '../db/pool';
import { ApiError, notFound, serviceUnavailable } from '../api/errors';
import type { RequestCounter } from './request-counter';
import { ttlCache } from './ttl-cache';

/** Connections to replicas are kept open between requests. */
const replicaAgent = new Agent({ keepAlive: true, maxSockets: 256 });
/** How long the proxy reuses a deployment's lookup and its running replicas (see ttl-cache.ts). */
const ROUTE_TTL_MS = 500;

const hasBody = (req: Request) =>
  Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;

const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer'];

export function deploymentProxy(db: Db, counter: RequestCounter): express.Router {
  const router = express.Router();
  const turn = new Map<string, number>();
  const deployments = ttlCache<{ id: string } | null>(ROUTE_TTL_MS);
  const replicas = ttlCache<number[]>(ROUTE_TTL_MS);

  router.all('/deployments/:name{/*rest}', async (req: Request, res: Response) => {
    const principal = req.principal!;
    const name = String(req.params.name);
    const deployment = await deployments(`${principal.projectId}/${name}`, () =>
      findDeploymentByName(db, principal.projectId, name),
    );
    if (!deployment) throw notFound(`No deployment named '${name}' in this project.`);
    counter.count(deployment.id);
    const ports = await replicas(deployment.id, () => runningReplicaPorts(db, deployment.id));
    if (!ports.length) {
      throw serviceUnavailable(
        `Deployment '${name}' has no running replica yet (scaled to zero or starting); retry shortly.`,
        2,
      );
    }
    const i = (turn.get(deployment.id) ?? 0) % ports.length;
    turn.set(deployment.id, i + 1);
    // From here to the answer's last byte: the HTTPAvgRequestDuration signal (a caller that goes away
    // before the answer ends counts for nothing).
    const started = performance.now();
    res.once('finish', () => counter.answered(deployment.id, performance.now() - started));
    const rest = (req.params as { rest?: string[] }).rest;
    const query = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?')) : '';
    const path = `/${(rest ?? []).join('/')}${query}`;
    // A request without a body can go again if the replica turned out to be gone.
    const retryable = !hasBody(req);
    if ((await forwardToReplica(req, res, ports[i], path, undefined, retryable)) === 'refused') {
      replicas.invalidate(deployment.id);
      const fresh = (await runningReplicaPorts(db, deployment.id)).filter((p) => p !== ports[i]);
      if (!fresh.length)
        throw serviceUnavailable(`Deployment '${name}' has no running replica right now; retry shortly.`, 2);
      await forwardToReplica(req, res, fresh[0], path);
    }
  });
  return router;
}

/**
 * Sends the request to a replica on this host and streams its answer back
 * (server-sent events included), without the caller's API key or hop-by-hop
 * headers. `body` replaces the request's own body (when the gateway parsed it).
 */
export function forwardToReplica(
  req: Request,
  res: Response,
  port: number,
  path: string,
  body?: Buffer,
  /** Answer 'refused' (and write nothing) when the replica refuses the connection: the caller tries another. */
  retryable = false,
  /** Sees each chunk of the answer as it passes (the token-usage tap). */
  tap?: (chunk: Buffer) => void,
): Promise<'sent' | 'refused'> {
  const headers = { ...req.headers };
  delete headers.authorization; // the customer's Gantry key never reaches their container
  delete headers.host;
  for (const h of HOP_BY_HOP) delete headers[h];
  headers['x-forwarded-for'] = req.ip ?? '';
  if (body) headers['content-length'] = String(body.length);
  return new Promise<'sent' | 'refused'>((resolve) => {
    const upstream = httpRequest(
      { host: '127.0.0.1', port, method: req.method, path, headers, agent: replicaAgent },
      (up) => {
        const out = { ...up.headers };
        for (const h of HOP_BY_HOP) delete out[h];
        res.writeHead(up.statusCode ?? 502, out);
        if (tap) up.on('data', tap);
        up.pipe(res);
        up.on('end', () => resolve('sent'));
        up.on('error', () => resolve('sent'));
      },
    );
    upstream.on('error', (err) => {
      if (retryable && !res.headersSent && (err as NodeJS.ErrnoException).code === 'ECONNREFUSED') {
        return resolve('refused');
      }
      if (!res.headersSent) {
        const e = new ApiError(502, `The replica did not answer: ${err.message}`, 'api_error', null, 'bad_gateway');
        res.status(502).json(e.toBody());
      } else res.destroy();
      resolve('sent');
    });
    if (body) upstream.end(body);
    else req.pipe(upstream);
  });
}
