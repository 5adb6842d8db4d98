/**
 * The one way routes are added. A route declares its method, path, access,
 * zod schemas for path params, query and body, and its response schema; from
 * that one declaration it is mounted on Express with validation and appears in
 * the OpenAPI document. Handlers receive parsed, typed input and the caller's
 * Principal, and return the response body.
 */
import type { Request, RequestHandler, Response } from 'express';
import type { OpenAPIRegistry, RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z, type ZodObject, type ZodType } from 'zod';
import type { Principal } from '../db/accounts';
import { checkAccess, type Access } from './middleware/auth';
import { badRequest, notFound } from './errors';
import { parseOrThrow } from './validation';
import { sendJson } from './json-response';
import { SegmentRouter, type Method } from './segment-router';
import { ErrorResponseSchema } from './schemas/common';
import { STRICT_EXTENSION } from './openapi/document';

export type BodyType = 'json' | 'form' | 'multipart';

const MEDIA_TYPES: Record<BodyType, string[]> = {
  json: ['application/json', 'application/*+json'],
  form: ['application/x-www-form-urlencoded'],
  multipart: ['multipart/form-data'],
};
type AnyObject = ZodObject;
export type ProjectScope = 'key' | 'key-or-public' | 'organization';

/** The installation's own project name in resource paths (public deployment profiles). */
export const PUBLIC_PROJECT = 'public';

/** The path's project must be the key's (by id or slug): anything else is not found, whoever owns it. */
function checkProjectScope(scope: ProjectScope, principal: Principal, projectId: string): void {
  if (scope === 'organization') return;
  if (scope === 'key-or-public' && projectId === PUBLIC_PROJECT) return;
  if (projectId !== principal.projectId && projectId !== principal.projectSlug) {
    throw notFound(`Project '${projectId}' not found. This key belongs to project '${principal.projectSlug}'.`);
  }
}

export interface RouteContext<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  principal: Principal;
  /** The caller's `Idempotency-Key`, on routes that declare `idempotencyKey` (see there). */
  idempotencyKey?: string;
  req: Request;
  res: Response;
}

/**
 * `Idempotency-Key`: a client's own id for one change, so that a retry after a lost answer
 * returns the first outcome instead of applying the change twice. Printable ASCII, no spaces.
 */
const IdempotencyKeyHeaders = z.object({
  'idempotency-key': z
    .string()
    .min(1)
    .max(255)
    .regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces')
    .optional()
    .describe('A client id for this change: a retry with the same key returns the first outcome.'),
});

export interface RouteSpec<P extends AnyObject, Q extends AnyObject, B extends ZodType, R extends ZodType> {
  method: Method;
  /** Express-style path relative to the router, e.g. `/system/self-checks/:id`. */
  path: string;
  operationId: string;
  summary: string;
  tags: string[];
  /** Who may call it; every route authenticates. Default: any key of the project. */
  access?: Access;
  /**
   * Required on a path with `:projectId`: who that project may be. `key`: the key's own project
   * (by id or slug), anything else is a 404 whoever owns it; `key-or-public` also lets through
   * `public`, the installation's own resources; `organization`: any project of the caller's
   * organization, the handler deciding on membership (the project administration routes).
   */
  projectScope?: ProjectScope;
  params?: P;
  query?: Q;
  body?: B;
  /** Refuse query parameters and body fields the schemas do not name (400 naming the field). */
  strict?: boolean;
  /**
   * The change is an Update of an entity workflow: the route reads `Idempotency-Key` and passes
   * it on as the Update's id, so the workflow applies a retried request once (executeEntityUpdate).
   */
  idempotencyKey?: boolean;
  /** Body encodings accepted (default json). `multipart` needs a parser in `before`. */
  bodyTypes?: BodyType[];
  /** Middleware run after authentication and the content-type check, before validation (e.g. multer). */
  before?: RequestHandler[];
  /** Undoes what `before` did (e.g. a stored upload) when validation or the handler fails. */
  cleanup?: (req: Request) => Promise<void>;
  response: { status: number; description: string; schema: R; mediaType?: string };
  /** Other answers without a body, e.g. 204 from a long-poll that found nothing: status and meaning. */
  emptyResponses?: Record<number, string>;
  /** Error statuses worth documenting beyond 400/401. */
  errors?: number[];
  /** Returns the body; or writes `res` itself (streams, redirects) and returns undefined. */
  handler: (ctx: RouteContext<z.output<P>, z.output<Q>, z.output<B>>) => Promise<z.input<R> | undefined>;
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request; `param` names the offending field',
  401: 'Missing or invalid API key',
  402: "The organization's remaining credit does not cover it",
  403: 'The key may not use this route',
  404: 'Not found in this project',
  409: 'Conflicts with the resource state',
  413: 'Request body too large',
  429: 'Too many requests; retry after Retry-After seconds',
  503: 'A backing service is unavailable; retry with backoff',
};

const hasBody = (req: Request) =>
  Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;

/**
 * The query schema of a route that declares none (strict routes refuse any parameter). One
 * instance: zod compiles a schema on its first parse, so a schema made per request cost a
 * compile per request (2% of the API's time in the queue bench).
 */
const NO_QUERY = z.object({});

/** A route as the router registered it: what the OpenAPI document must list (see `ApiRouter.routes`). */
export interface RegisteredRoute {
  method: Method;
  /** The documented path, e.g. `/v1/fine-tunes/{id}`. */
  path: string;
  operationId: string;
  /** Who may call it: an API key's access (`project`, `platform-admin`), or `signed` (the URL is the credential). */
  access: Access | 'signed';
  response: { status: number; schema: ZodType; mediaType: string };
}

export class ApiRouter {
  private readonly keyed = new SegmentRouter();
  private readonly signed = new SegmentRouter();
  /** The middleware app.ts mounts after key authentication: every route but the signed ones. */
  readonly router = this.keyed.handle;
  /** Every route added, keyed and signed, in order: the OpenAPI document is checked against this list. */
  readonly routes: RegisteredRoute[] = [];
  /** Routes whose URL is its own credential (pre-signed); app.ts mounts these after the per-address limit, before key authentication. */
  readonly signedRouter = this.signed.handle;

  /** What this router's Express routers answer, keyed and signed, as documented paths (`/v1/files/{id}`). */
  dispatched(): Array<{ method: string; path: string }> {
    return [...this.keyed.dispatched(), ...this.signed.dispatched()].map((r) => ({
      method: r.method,
      path: this.prefix + r.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}'),
    }));
  }

  constructor(
    private readonly registry: OpenAPIRegistry,
    /** Mount prefix of this router, for the OpenAPI paths, e.g. `/v1`. */
    private readonly prefix: string,
    /** Response bodies are checked against their schema outside production so the document cannot drift. */
    private readonly checkResponses: boolean,
  ) {}

  add<P extends AnyObject, Q extends AnyObject, B extends ZodType, R extends ZodType>(spec: RouteSpec<P, Q, B, R>) {
    this.document(spec);
    if (spec.path.includes(':projectId') !== (spec.projectScope !== undefined)) {
      throw new Error(
        `route ${spec.operationId}: a path with :projectId declares its projectScope, and only such a path`,
      );
    }
    const access = spec.access ?? 'project';
    const strict = spec.strict ?? false;
    const bodyTypes = spec.bodyTypes ?? ['json'];
    const accepted = bodyTypes.flatMap((t) => MEDIA_TYPES[t]);
    const gate: RequestHandler = (req, res, next) => {
      // The route's pattern, for metrics labels (ids in the path never become labels).
      res.locals.routePattern = `${this.prefix}${spec.path}`;
      const principal = req.principal;
      if (!principal) throw new Error(`route ${spec.operationId} reached without authentication`);
      checkAccess(principal, access);
      // A bodiless request to a route that takes only multipart (a file) is refused here too.
      const onlyMultipart = bodyTypes.length === 1 && bodyTypes[0] === 'multipart';
      if (spec.body && (hasBody(req) || onlyMultipart) && !req.is(accepted)) {
        throw badRequest(
          `Unsupported Content-Type '${req.headers['content-type'] ?? ''}': send the body as ${accepted.join(' or ')}.`,
          null,
          'unsupported_content_type',
        );
      }
      next();
    };
    this.keyed.add(spec.method, spec.path, gate, ...(spec.before ?? []), async (req: Request, res: Response) => {
      const principal = req.principal!;
      let result: z.input<R> | undefined;
      try {
        const params = spec.params ? parseOrThrow(spec.params, req.params, 'path', false) : {};
        if (spec.projectScope) checkProjectScope(spec.projectScope, principal, String(req.params.projectId));
        const query = parseOrThrow(spec.query ?? NO_QUERY, req.query ?? {}, 'query', strict);
        const body = spec.body ? parseOrThrow(spec.body, req.body, 'body', strict) : undefined;
        const idempotencyKey = spec.idempotencyKey
          ? parseOrThrow(IdempotencyKeyHeaders, req.headers, 'header', false)['idempotency-key']
          : undefined;
        result = await spec.handler({ params, query, body, principal, idempotencyKey, req, res } as RouteContext<
          z.output<P>,
          z.output<Q>,
          z.output<B>
        >);
      } catch (err) {
        if (spec.cleanup) await spec.cleanup(req).catch((e) => req.log?.error({ err: e }, 'cleanup failed'));
        throw err;
      }
      if (res.headersSent || result === undefined) return;
      if (this.checkResponses) {
        const check = spec.response.schema.safeParse(result);
        if (!check.success) {
          throw new Error(
            `response of ${spec.operationId} does not match its schema: ${JSON.stringify(check.error.issues[0])}`,
          );
        }
      }
      sendJson(res, spec.response.status, result);
    });
  }

  /**
   * Adds a route that takes no API key because its URL is signed (a
   * pre-signed upload or download): the handler verifies the signature. It is
   * documented like any other route, without the bearer requirement.
   */
  addSigned(
    spec: Omit<RouteSpec<AnyObject, AnyObject, ZodType, ZodType>, 'handler' | 'access'>,
    handler: (req: Request, res: Response) => Promise<void>,
  ) {
    this.document({ ...spec, handler: async () => undefined }, false);
    this.signed.add(spec.method, spec.path, handler);
  }

  private document(spec: RouteSpec<AnyObject, AnyObject, ZodType, ZodType>, keyed = true) {
    const statuses = [
      400,
      ...(keyed ? [401] : []),
      // Every route passes the rate limits, signed ones the per-address limit (api/middleware/rate-limit.ts).
      429,
      ...(spec.access === 'platform-admin' ? [403] : []),
      ...(spec.errors ?? []),
    ];
    const responses: RouteConfig['responses'] = {
      [spec.response.status]: {
        description: spec.response.description,
        content: { [spec.response.mediaType ?? 'application/json']: { schema: spec.response.schema } },
      },
    };
    for (const [status, description] of Object.entries(spec.emptyResponses ?? {})) responses[status] = { description };
    for (const s of new Set(statuses)) {
      responses[s] = {
        description: ERROR_DESCRIPTIONS[s] ?? 'Error',
        content: { 'application/json': { schema: ErrorResponseSchema } },
      };
    }
    const documentedPath = this.prefix + spec.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    this.routes.push({
      method: spec.method,
      path: documentedPath,
      operationId: spec.operationId,
      access: keyed ? (spec.access ?? 'project') : 'signed',
      response: {
        status: spec.response.status,
        schema: spec.response.schema,
        mediaType: spec.response.mediaType ?? 'application/json',
      },
    });
    this.registry.registerPath({
      method: spec.method,
      path: documentedPath,
      operationId: spec.operationId,
      summary: spec.summary,
      tags: spec.tags,
      security: keyed ? [{ bearerAuth: [] }] : [],
      // Read by generateDocument (api/openapi/document.ts): a strict route refuses unknown body fields.
      ...(spec.strict ? { [STRICT_EXTENSION]: true } : {}),
      request: {
        params: spec.params,
        query: spec.query,
        headers: spec.idempotencyKey ? IdempotencyKeyHeaders : undefined,
        body: spec.body
          ? {
              required: true,
              content: Object.fromEntries(
                (spec.bodyTypes ?? ['json']).map((t) => [MEDIA_TYPES[t][0], { schema: spec.body! }]),
              ),
            }
          : undefined,
      },
      responses,
    });
  }
}
