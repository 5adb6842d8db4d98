/**
 * The gateway's proxy to container deployments: `{inference_url}/v1/deployments/<name>/<path>`
 * goes to one of the deployment's running replicas (round robin), with the
 * caller's API key removed. Every request is counted per second for the
 * HTTPTotalRequests autoscaler; a deployment with no running replica (scaled
 * to zero, or starting) answers 503 with Retry-After, and the counted request
 * is what makes the autoscaler start one.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent } from 'undici';
import type { Principal } from '../db/accounts';
import { findDeploymentByName, runningReplicaOrigins } from '../db/deployments';
import type { Db } from '../db/pool';
import { ApiError, notFound, serviceUnavailable } from '../api/errors';
import type { RequestCounter } from './request-counter';
import { ttlCache } from './ttl-cache';
import { ForwardFailed, forwardedHeaders, forwardRequest, hasBody } from '../platform/http-forward';
import type { KeptAnswer } from '../db/work-call-answers';
import { WORK_CALL_HEADER } from '../shared/work-calls';

/** One request to the gateway, authenticated. */
export interface GatewayCall {
  req: IncomingMessage;
  res: ServerResponse;
  principal: Principal;
  /** The client's address (through the proxies GANTRY_TRUST_PROXY trusts). */
  clientAddress: string;
}

/**
 * Connections to replicas, kept open between requests (undici's pool: about half the cost per
 * request of node:http's client). No timeouts of its own: a completion may think for minutes
 * before its first byte, and the caller going away is what ends a request early.
 */
const replicaAgent = new Agent({ connections: 256, headersTimeout: 0, bodyTimeout: 0 });
/** How long the proxy reuses a deployment's lookup and its running replicas (see ttl-cache.ts). */
const ROUTE_TTL_MS = 500;

export function deploymentProxy(
  db: Db,
  counter: RequestCounter,
): (call: GatewayCall, name: string, path: string) => Promise<void> {
  const turn = new Map<string, number>();
  const deployments = ttlCache<{ id: string } | null>(ROUTE_TTL_MS);
  const replicas = ttlCache<string[]>(ROUTE_TTL_MS);

  return async (call, name, path) => {
    const projectId = call.principal.projectId;
    const deployment = await deployments(`${projectId}/${name}`, () => findDeploymentByName(db, projectId, name));
    if (!deployment) throw notFound(`No deployment named '${name}' in this project.`);
    counter.count(deployment.id);
    const origins = await replicas(deployment.id, () => runningReplicaOrigins(db, deployment.id));
    if (!origins.length) {
      throw serviceUnavailable(
        `Deployment '${name}' has no running replica yet (scaled to zero or starting); retry shortly.`,
        2,
      );
    }
    const i = (turn.get(deployment.id) ?? 0) % origins.length;
    turn.set(deployment.id, i + 1);
    // From here to the answer's last byte: the HTTPAvgRequestDuration signal (a caller that goes away
    // before the answer ends counts for nothing).
    const started = performance.now();
    call.res.once('finish', () => counter.answered(deployment.id, performance.now() - started));
    // A request without a body can go again if the replica turned out to be gone.
    if ((await forwardToReplica(call, origins[i], path, { retryable: !hasBody(call.req) })) === 'refused') {
      replicas.invalidate(deployment.id);
      const fresh = (await runningReplicaOrigins(db, deployment.id)).filter((o) => o !== origins[i]);
      if (!fresh.length)
        throw serviceUnavailable(`Deployment '${name}' has no running replica right now; retry shortly.`, 2);
      await forwardToReplica(call, fresh[0], path);
    }
  };
}

/**
 * Sends the request to a replica (at its host's address: replicaOrigin) and streams its answer
 * back as it comes (platform/http-forward.ts), without the caller's API key: the customer's Gantry
 * key never reaches their container. Throws a 502 when the replica cannot be reached.
 */
export async function forwardToReplica(
  call: GatewayCall,
  /** `http://<address>:<port>` of the replica. */
  origin: string,
  /** The replica's path, with the query as it came. */
  path: string,
  opts: {
    /** Replaces the request's own body (when the gateway read it). */
    body?: Buffer;
    /** Answer 'refused' (and write nothing) when the replica refuses the connection: the caller tries another. */
    retryable?: boolean;
    /** Sees each chunk of the answer as it passes (the token-usage tap). */
    tap?: (chunk: Buffer) => void;
  } = {},
): Promise<'sent' | 'refused'> {
  try {
    return await forwardRequest(call.req, call.res, {
      ...opts,
      agent: replicaAgent,
      origin,
      path,
      headers: forwardedHeaders(call.req, { forwardedFor: call.clientAddress, drop: ['authorization'] }),
    });
  } catch (err) {
    if (!(err instanceof ForwardFailed)) throw err;
    throw new ApiError(502, `The replica did not answer: ${err.message}`, 'api_error', null, 'bad_gateway');
  }
}

/**
 * Sends the request to a replica and reads its whole answer, with no tie to the caller's
 * connection: the call goes on to its end when the caller goes away (kept work calls,
 * gateway/kept-work-calls.ts). Answers 'refused' when the replica refused the connection (the
 * caller tries another); throws a 502 when it cannot be reached otherwise.
 */
export async function askReplica(
  call: GatewayCall,
  origin: string,
  path: string,
  body: Buffer,
): Promise<KeptAnswer | 'refused'> {
  try {
    const answer = await replicaAgent.request({
      origin,
      path,
      method: 'POST',
      headers: {
        ...forwardedHeaders(call.req, {
          forwardedFor: call.clientAddress,
          drop: ['authorization', 'content-length', WORK_CALL_HEADER],
        }),
        'content-length': String(body.length),
      },
      body,
    });
    const contentType = answer.headers['content-type'];
    return {
      status: answer.statusCode,
      contentType: typeof contentType === 'string' ? contentType : null,
      body: Buffer.from(await answer.body.arrayBuffer()),
    };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ECONNREFUSED') return 'refused';
    throw new ApiError(502, `The replica did not answer: ${(err as Error).message}`, 'api_error', null, 'bad_gateway');
  }
}
