/**
 * The inference gateway's OpenAI-compatible routes: `POST {inference_url}/v1/chat/completions`
 * and `/v1/completions`, where `model` is an endpoint string
 * `<project_slug>/<endpoint_name>`. A request goes to one of the endpoint's
 * deployments by its traffic split, then to one of that deployment's running
 * replicas; the answer (server-sent events when `stream` is set) is the model
 * server's. A deployment scaled to zero is woken by the request, which waits
 * for a ready replica up to GANTRY_GATEWAY_WAKE_TIMEOUT_SECONDS, then gets 503
 * with Retry-After. Only keys of the endpoint's project may call it.
 *
 * A LoRA adapter attached to the endpoint's deployments is called as
 * `<project_slug>/<endpoint_name>:<adapter>` (the adapter model's id or name):
 * the request goes to a deployment that has it, and the replica answers with
 * the adapter applied (503 if that replica has not loaded it yet).
 *
 * Serverless: `model` set to a catalog model's name (`GET /v1/models` lists those
 * offered, e.g. `HuggingFaceTB/SmolLM2-135M-Instruct`) goes to the platform's
 * pool for that model (api/serverless-pools.ts), shared by every project, woken
 * from zero the same way, limited per project (429 with Retry-After) and billed
 * per token at the catalog's prices. A catalog name has a `/` too; it is the
 * catalog model unless it is also the caller's own endpoint string (a project
 * whose slug is `gantry` with an endpoint `reference-byte-tiny`): what a
 * project named itself is what it means.
 */
import getRawBody from 'raw-body';
import { findDeploymentByName, runningReplicaOrigins } from '../db/deployments';
import {
  findEndpointBySlug,
  listEndpointDeployments,
  type EndpointDeploymentRow,
  type EndpointRow,
} from '../db/endpoints';
import { deploymentsWithAdapter } from '../db/endpoint-adapters';
import type { Db } from '../db/pool';
import { deploymentState, trafficShares } from '../shared/endpoint-state';
import { PLATFORM_PROJECT_ID, serverlessPoolName } from '../shared/serverless';
import { findServerlessModel, type FineTuneModel } from '../fine-tunes/models';
import { ApiError, badRequest, notFound, serviceUnavailable } from '../api/errors';
import type { LimitCheck } from '../api/middleware/rate-limit';
import { askReplica, forwardToReplica, type GatewayCall } from './proxy';
import type { RequestCounter } from './request-counter';
import {
  endpointTokenBilling,
  serverlessTokenBilling,
  workTokenBilling,
  type TokenCounts,
  type TokenUsage,
  UsageTap,
} from './token-usage';
import type { RouterStats } from './router-stats';
import type { WorkTraffic } from './work-traffic';
import type { KeptWorkCalls } from './kept-work-calls';
import type { KeptAnswer } from '../db/work-call-answers';
import { workCallKey } from '../api/work-call-key';
import { ttlCache } from './ttl-cache';

const WAIT_STEP_MS = 250;
/**
 * How long the gateway reuses what it read about an endpoint (its deployments
 * and traffic split), a serverless pool, and a deployment's running replicas: a
 * change of weights takes effect within this, and a request costs no database round trip.
 */
const ROUTE_TTL_MS = 500;

/** The largest request body the gateway reads (it reads `model` to route). */
const BODY_LIMIT = '4mb';

/** The OpenAI-compatible paths the gateway routes by endpoint string or serverless model. */
export type InferencePath = '/chat/completions' | '/completions';

/** What a call came to: its token counts (null when it failed or had none), and its answer when kept. */
interface Reached {
  counts: TokenCounts | null;
  kept?: KeptAnswer;
}

/** The body as bytes, to be forwarded as it came (it is parsed only to read `model`). */
async function readBody(req: GatewayCall['req']): Promise<Buffer> {
  const encoding = req.headers['content-encoding'];
  if (encoding && encoding !== 'identity') {
    throw badRequest(
      `Content-Encoding '${encoding}' is not accepted here: send the body uncompressed.`,
      null,
      'unsupported_encoding',
    );
  }
  return getRawBody(req, { limit: BODY_LIMIT, length: req.headers['content-length'] });
}

export function inferenceRoutes(
  db: Db,
  opts: {
    wakeTimeoutSeconds: number;
    counter: RequestCounter;
    stats: RouterStats;
    tokens: TokenUsage;
    /** Serverless calls' limit, per project and catalog model. */
    serverlessLimit: LimitCheck;
    /** Batch and evaluation calls: a concurrency per project, interactive calls first. */
    work: WorkTraffic;
    /** Batch and evaluation calls: each named call made once, its answer kept. */
    kept: KeptWorkCalls;
  },
): (call: GatewayCall, path: InferencePath) => Promise<void> {
  const turn = new Map<string, number>();
  const routes = ttlCache<{ endpoint: EndpointRow; deployments: EndpointDeploymentRow[] } | null>(ROUTE_TTL_MS);
  const replicas = ttlCache<string[]>(ROUTE_TTL_MS);
  const pools = ttlCache<{ id: string } | null>(ROUTE_TTL_MS);

  /**
   * Sends the call to a running replica of container deployment `containerId` (round robin),
   * waiting for one while it wakes from zero. Streamed back as it comes, or, for a kept work call
   * (`keep`), read whole and returned to be kept.
   */
  async function toReplica(
    call: GatewayCall,
    containerId: string,
    /** What was called, as a 503 names it. */
    what: string,
    path: InferencePath,
    body: Buffer,
    stream: boolean,
    keep: boolean,
  ): Promise<Reached> {
    const { principal } = call;
    const done = principal.work
      ? await opts.work.workCall(principal.projectId, containerId)
      : opts.work.interactiveCall(containerId);
    try {
      return keep
        ? await relayKept(call, containerId, what, path, body)
        : { counts: await relay(call, containerId, what, path, body, stream) };
    } finally {
      done();
    }
  }

  /** The origins of `containerId`'s running replicas, starting with the one whose turn it is; waits while it wakes. */
  async function replicasInTurn(call: GatewayCall, containerId: string, what: string): Promise<string[]> {
    let origins = await replicas(containerId, () => runningReplicaOrigins(db, containerId));
    const deadline = Date.now() + opts.wakeTimeoutSeconds * 1000;
    while (!origins.length && Date.now() < deadline && !call.req.socket.destroyed) {
      await new Promise((r) => setTimeout(r, WAIT_STEP_MS));
      origins = await runningReplicaOrigins(db, containerId);
    }
    if (!origins.length) {
      throw serviceUnavailable(
        `${what} has no ready replica yet (it is starting or waking from zero); retry in a few seconds.`,
        5,
      );
    }
    const i = (turn.get(containerId) ?? 0) % origins.length;
    turn.set(containerId, i + 1);
    return [...origins.slice(i), ...origins.slice(0, i)];
  }

  /** Another running replica than `gone`, which refused the connection (the body is in hand, so it can go again). */
  async function replicaInstead(containerId: string, what: string, gone: string): Promise<string> {
    replicas.invalidate(containerId);
    const fresh = (await runningReplicaOrigins(db, containerId)).filter((o) => o !== gone);
    if (!fresh.length) throw serviceUnavailable(`${what} has no ready replica right now; retry shortly.`, 2);
    return fresh[0];
  }

  async function relay(
    call: GatewayCall,
    containerId: string,
    what: string,
    path: InferencePath,
    body: Buffer,
    stream: boolean,
  ): Promise<TokenCounts | null> {
    const [origin] = await replicasInTurn(call, containerId, what);
    const tap = new UsageTap(stream);
    const write = (chunk: Buffer) => tap.write(chunk);
    if ((await forwardToReplica(call, origin, `/v1${path}`, { body, retryable: true, tap: write })) === 'refused')
      await forwardToReplica(call, await replicaInstead(containerId, what, origin), `/v1${path}`, { body, tap: write });
    return call.res.statusCode < 400 ? tap.usage() : null;
  }

  async function relayKept(
    call: GatewayCall,
    containerId: string,
    what: string,
    path: InferencePath,
    body: Buffer,
  ): Promise<Reached> {
    const [origin] = await replicasInTurn(call, containerId, what);
    let kept = await askReplica(call, origin, `/v1${path}`, body);
    if (kept === 'refused')
      kept = await askReplica(call, await replicaInstead(containerId, what, origin), `/v1${path}`, body);
    if (kept === 'refused') throw serviceUnavailable(`${what} has no ready replica right now; retry shortly.`, 2);
    if (kept.status >= 400) return { counts: null, kept };
    const tap = new UsageTap(false);
    tap.write(kept.body);
    return { counts: tap.usage(), kept };
  }

  /** A serverless call: the platform's pool of the catalog model, within the project's limit, billed per token. */
  async function serverless(
    call: GatewayCall,
    path: InferencePath,
    model: FineTuneModel,
    body: Buffer,
    stream: boolean,
    keep: boolean,
  ): Promise<Reached> {
    const pool = await pools(model.name, () =>
      findDeploymentByName(db, PLATFORM_PROJECT_ID, serverlessPoolName(model.name)),
    );
    if (!pool)
      throw notFound(
        `'${model.name}' is not served serverless on this installation; deploy it behind a dedicated endpoint.`,
        'model_not_found',
      );
    await opts.serverlessLimit({ principal: call.principal, serverlessModel: model.name }, call.res);
    opts.counter.count(pool.id); // the pool's autoscaler signal, and what wakes it at zero
    delete call.req.headers['x-gantry-adapter']; // a pool serves its base model only
    const reached = await toReplica(call, pool.id, `Model '${model.name}'`, path, body, stream, keep);
    if (reached.counts)
      opts.tokens.record(
        workTokenBilling(
          serverlessTokenBilling(call.principal.projectId, model.name, model.serverlessPricePerMillionTokens!),
          call.principal.work,
        ),
        reached.counts,
      );
    return reached;
  }

  /** Routes a call to its endpoint's deployment or serverless pool, and bills its tokens. */
  async function route(call: GatewayCall, path: InferencePath, keep: boolean): Promise<Reached> {
    const { req, res, principal } = call;
    const bytes = await readBody(req);
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(bytes.toString('utf8') || '{}');
    } catch {
      throw badRequest('The body is not JSON.', null, 'invalid_json');
    }
    const model = parsed?.model;
    if (typeof model !== 'string' || !model)
      throw badRequest(
        'model is required: an endpoint string <project_slug>/<endpoint_name>, or a serverless model (GET /v1/models).',
        'model',
      );
    const stream = parsed?.stream === true;
    const slash = model.indexOf('/');
    if (slash < 0) {
      throw notFound(
        /^(ml_|ep_|dp-)/.test(model)
          ? `'${model}' is an object id; call an endpoint by its endpoint string '<project_slug>/<endpoint_name>' (here: '${principal.projectSlug}/<endpoint_name>').`
          : `No endpoint '${model}'. Call an endpoint by its endpoint string '<project_slug>/<endpoint_name>', or a serverless model by its name (GET /v1/models).`,
        'model_not_found',
      );
    }
    const [endpointName, adapterName] = model.slice(slash + 1).split(':', 2);
    const lookup = () =>
      routes(`${model.slice(0, slash)}/${endpointName}`, async () => {
        const endpoint = await findEndpointBySlug(db, model.slice(0, slash), endpointName);
        if (!endpoint) return null;
        const deployments = (await listEndpointDeployments(db, endpoint.id)).filter(
          (d) => d.container_deployment_id && deploymentState(d).state !== 'DEPLOYMENT_STATE_STOPPING',
        );
        return { endpoint, deployments };
      });
    const catalog = findServerlessModel(model);
    if (catalog) {
      // Only the caller's own endpoint of the same string comes first (no other project's is reachable).
      const own = model.slice(0, slash) === principal.projectSlug ? await lookup() : null;
      if (own?.endpoint.project_id !== principal.projectId) return serverless(call, path, catalog, bytes, stream, keep);
    }
    const route = await lookup();
    // Another project's endpoint is not found, exactly like a missing one.
    if (!route || route.endpoint.project_id !== principal.projectId)
      throw notFound(`No endpoint '${model}' in this project.`, 'model_not_found');
    const endpoint = route.endpoint;
    let deployments = route.deployments;
    let adapterId: string | undefined;
    if (adapterName) {
      const withAdapter = await deploymentsWithAdapter(
        db,
        principal.projectId,
        deployments.map((d) => d.id),
        adapterName,
      );
      if (!withAdapter.size)
        throw notFound(`No deployment of '${endpointName}' has adapter '${adapterName}' attached.`, 'model_not_found');
      deployments = deployments.filter((d) => withAdapter.has(d.id));
      adapterId = [...withAdapter.values()][0];
    }
    if (!deployments.length) throw serviceUnavailable(`Endpoint '${model}' has no deployment to serve it.`, 30);
    const shares = trafficShares(endpoint, deployments);
    let pick = Math.random();
    const chosen = deployments.find((d) => (pick -= shares.get(d.id) ?? 0) < 0) ?? deployments[deployments.length - 1];
    const containerId = chosen.container_deployment_id!;
    opts.counter.count(containerId); // the autoscaler's signal, and what wakes a deployment at zero
    // What the caller gets from this deployment (status, time to the last byte) feeds the rollout gates.
    const started = performance.now();
    res.setHeader('x-gantry-deployment', chosen.id);
    res.once('close', () => opts.stats.record(chosen.id, performance.now() - started, res.statusCode >= 500));
    const fault = chosen.fault_injection;
    if (fault && Math.random() * 100 < fault.abortPercent) {
      throw new ApiError(
        fault.httpStatus,
        `Fault injected by an operator at the gateway for deployment ${chosen.id} (${fault.abortPercent}% of its requests).`,
        fault.httpStatus === 503 ? 'service_unavailable' : 'api_error',
        null,
        'fault_injected',
      );
    }

    // Only the gateway chooses the adapter: a client's own header is dropped.
    if (adapterId) req.headers['x-gantry-adapter'] = adapterId;
    else delete req.headers['x-gantry-adapter'];
    const body = adapterId ? Buffer.from(JSON.stringify({ ...parsed, model: adapterId })) : bytes;
    const reached = await toReplica(call, containerId, `Endpoint '${model}'`, path, body, stream, keep);
    if (reached.counts)
      opts.tokens.record(
        workTokenBilling(
          endpointTokenBilling({ id: endpoint.id, projectId: endpoint.project_id, name: endpoint.name }),
          principal.work,
        ),
        reached.counts,
      );
    return reached;
  }

  return async (call, path) => {
    const key = workCallKey(call.req.headers, call.principal);
    if (key === undefined) return void (await route(call, path, false));
    // The call runs to its end whether or not this caller stays; its answer is kept for the next.
    const kept = await opts.kept.once(call.principal.work!, key, async () => (await route(call, path, true)).kept!);
    if (kept.contentType) call.res.setHeader('content-type', kept.contentType);
    call.res.writeHead(kept.status).end(kept.body);
  };
}
