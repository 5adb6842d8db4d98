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
 */
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import type { GantryConfig } from '../../platform/config';
import { tooManyRequests } from '../errors';

interface Limit {
  perSecond: number;
  burst: number;
}

interface Scope extends Limit {
  /** What the client is told it exceeded: "this API key", … */
  what: string;
  keyOf: (req: Request) => string | undefined;
}

function bucket(scope: Scope) {
  if (scope.perSecond <= 0) return undefined;
  // A bucket of `burst` points refilled fully over burst/perSecond seconds approximates a token bucket.
  const limiter = new RateLimiterMemory({
    points: scope.burst,
    duration: Math.max(1, Math.round(scope.burst / scope.perSecond)),
  });
  return { scope, limiter };
}

/** One middleware enforcing `scopes` in order; the first one exhausted refuses the request. */
function enforce(scopes: Scope[]): RequestHandler {
  const buckets = scopes.map(bucket).filter((b) => b !== undefined);
  return (req: Request, res: Response, next: NextFunction) => {
    void (async () => {
      for (const { scope, limiter } of buckets) {
        const key = scope.keyOf(req);
        if (!key) continue;
        try {
          const r = await limiter.consume(key);
          res.setHeader('X-RateLimit-Limit', String(scope.burst));
          res.setHeader('X-RateLimit-Remaining', String(r.remainingPoints));
        } catch (r) {
          if (!(r instanceof RateLimiterRes)) return next(r);
          const retryAfter = Math.max(1, Math.ceil(r.msBeforeNext / 1000));
          res.setHeader('X-RateLimit-Limit', String(scope.burst));
          res.setHeader('X-RateLimit-Remaining', '0');
          return next(
            tooManyRequests(
              `Rate limit of ${scope.what} reached (${scope.perSecond}/s, bursts of ${scope.burst}); retry after ${retryAfter} s.`,
              retryAfter,
            ),
          );
        }
      }
      next();
    })();
  };
}

/** The limits of an API or gateway process: `beforeAuth` goes before authentication, `afterAuth` after it. */
export function rateLimits(
  config: Pick<GantryConfig, 'rateLimitPerSecond' | 'rateLimitBurst' | 'projectRateLimit' | 'addressRateLimit'>,
): { beforeAuth: RequestHandler; afterAuth: RequestHandler } {
  return {
    beforeAuth: enforce([{ ...config.addressRateLimit, what: 'this client address', keyOf: (req) => req.ip }]),
    afterAuth: enforce([
      {
        perSecond: config.rateLimitPerSecond,
        burst: config.rateLimitBurst,
        what: 'this API key',
        keyOf: (req) => req.principal?.apiKeyId,
      },
      { ...config.projectRateLimit, what: 'this project', keyOf: (req) => req.principal?.projectId },
    ]),
  };
}

/** Express's `trust proxy` value for GANTRY_TRUST_PROXY: a hop count when numeric, else addresses or names. */
export function trustProxy(setting: string): number | string {
  return /^\d+$/.test(setting) ? Number(setting) : setting;
}
