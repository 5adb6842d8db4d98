/**
 * Rate limits, each a token bucket in this process (with several API or
 * gateway processes, each enforces them on what it serves): `perSecond`
 * requests a second on average, bursts up to `burst`. Over a limit, 429 with
 * Retry-After (whole seconds until a request is allowed again) and the
 * X-RateLimit-* headers of the limit that refused it.
 *
 * Three scopes, because any one alone can be sidestepped:
 * - per client address, before authentication: unauthenticated requests and
 *   made-up keys are limited too;
 * - per API key;
 * - per project: a project's members can mint keys without limit, so the key
 *   limit alone does not bound what one project can ask of the installation.
 *
 * Serverless calls have one more, per project and catalog model: every project
 * shares that model's pool (api/serverless-pools.ts), so no one project may
 * take all of it.
 */
import type { ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import proxyaddr from 'proxy-addr';
import type { Principal } from '../../db/accounts';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { GantryConfig } from '../../platform/config';
import { tooManyRequests } from '../errors';

interface Limit {
  perSecond: number;
  burst: number;
}

/** Who a request is, as far as the limits care: its client address, and its principal once authenticated. */
export interface LimitSubject {
  ip?: string;
  principal?: Pick<Principal, 'apiKeyId' | 'projectId'>;
  /** The catalog model a serverless call asks for (its pool). */
  serverlessModel?: string;
}

interface Scope extends Limit {
  /** What the client is told it exceeded: "this API key", … */
  what: string;
  keyOf: (subject: LimitSubject) => string | undefined;
}

/** Consumes one request of each scope in turn; throws the 429 of the first scope exhausted. */
export type LimitCheck = (subject: LimitSubject, res: Pick<ServerResponse, 'setHeader'>) => Promise<void>;

function bucket(scope: Scope) {
  if (scope.perSecond <= 0) return undefined;
  // A bucket of `burst` points refilled fully over burst/perSecond seconds approximates a token bucket.
  const limiter = new RateLimiterMemory({
    points: scope.burst,
    duration: Math.max(1, Math.round(scope.burst / scope.perSecond)),
  });
  return { scope, limiter };
}

/** One check enforcing `scopes` in order, setting the X-RateLimit-* headers of each. */
function enforce(scopes: Scope[]): LimitCheck {
  const buckets = scopes.map(bucket).filter((b) => b !== undefined);
  return async (subject, res) => {
    // The headers name the last scope passed (each later one would overwrite the one before): set once.
    let passed: { burst: number; remaining: number } | undefined;
    for (const { scope, limiter } of buckets) {
      const key = scope.keyOf(subject);
      if (!key) continue;
      try {
        const r = await limiter.consume(key);
        passed = { burst: scope.burst, remaining: r.remainingPoints };
      } catch (r) {
        if (!(r instanceof RateLimiterRes)) throw r;
        const retryAfter = Math.max(1, Math.ceil(r.msBeforeNext / 1000));
        res.setHeader('X-RateLimit-Limit', String(scope.burst));
        res.setHeader('X-RateLimit-Remaining', '0');
        throw tooManyRequests(
          `Rate limit of ${scope.what} reached (${scope.perSecond}/s, bursts of ${scope.burst}); retry after ${retryAfter} s.`,
          retryAfter,
        );
      }
    }
    if (passed) {
      res.setHeader('X-RateLimit-Limit', String(passed.burst));
      res.setHeader('X-RateLimit-Remaining', String(passed.remaining));
    }
  };
}

/** The limits of an API or gateway process: `beforeAuth` is checked before authentication, `afterAuth` after it. */
export function rateLimitChecks(
  config: Pick<GantryConfig, 'rateLimitPerSecond' | 'rateLimitBurst' | 'projectRateLimit' | 'addressRateLimit'>,
): { beforeAuth: LimitCheck; afterAuth: LimitCheck } {
  return {
    beforeAuth: enforce([{ ...config.addressRateLimit, what: 'this client address', keyOf: (s) => s.ip }]),
    afterAuth: enforce([
      {
        perSecond: config.rateLimitPerSecond,
        burst: config.rateLimitBurst,
        what: 'this API key',
        keyOf: (s) => s.principal?.apiKeyId,
      },
      { ...config.projectRateLimit, what: 'this project', keyOf: (s) => s.principal?.projectId },
    ]),
  };
}

/** The limit of serverless calls: per project, per catalog model (GANTRY_SERVERLESS_RATE_LIMIT_*). */
export function serverlessRateLimit(config: Pick<GantryConfig, 'serverless'>): LimitCheck {
  return enforce([
    {
      ...config.serverless.rateLimit,
      what: 'this project on this serverless model',
      keyOf: (s) => s.principal && s.serverlessModel && `${s.principal.projectId} ${s.serverlessModel}`,
    },
  ]);
}

/** The same limits as Express middleware (the API's). */
export function rateLimits(config: Parameters<typeof rateLimitChecks>[0]): {
  beforeAuth: RequestHandler;
  afterAuth: RequestHandler;
} {
  const checks = rateLimitChecks(config);
  const middleware =
    (check: LimitCheck): RequestHandler =>
    (req: Request, res: Response, next: NextFunction) =>
      void check(req, res).then(() => next(), next);
  return { beforeAuth: middleware(checks.beforeAuth), afterAuth: middleware(checks.afterAuth) };
}

/**
 * Which hops in front of this process are trusted to say who the client is (GANTRY_TRUST_PROXY): a
 * hop count when numeric, else addresses, subnets or proxy-addr's names (`loopback`, …). The API
 * gives it to Express as `trust proxy`; the gateway reads the client address with it itself.
 */
export function compileTrustProxy(setting: string | undefined): (address: string, hop: number) => boolean {
  if (!setting) return () => false;
  if (/^\d+$/.test(setting)) {
    const hops = Number(setting);
    return (_address, hop) => hop < hops;
  }
  return proxyaddr.compile(setting.split(',').map((s) => s.trim()));
}
