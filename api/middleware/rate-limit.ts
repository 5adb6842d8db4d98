/**
 * Per-key rate limiting: each API key may make `perSecond` requests a second
 * on average, with bursts up to `burst` (a token bucket per key, in this
 * process). Over it, 429 with Retry-After (whole seconds until a request is
 * allowed again) and the X-RateLimit-* headers. Runs after authentication, so
 * the key is known; unauthenticated requests never reach it. With several API
 * processes, each enforces the limit on what it serves.
 */
import type { NextFunction, Request, Response } from 'express';
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { tooManyRequests } from '../errors';

export function rateLimit(opts: { perSecond: number; burst: number }) {
  if (opts.perSecond <= 0) return (_req: Request, _res: Response, next: NextFunction) => next();
  // A bucket of `burst` points refilled fully over burst/perSecond seconds approximates a token bucket.
  const limiter = new RateLimiterMemory({
    points: opts.burst,
    duration: Math.max(1, Math.round(opts.burst / opts.perSecond)),
  });
  return (req: Request, res: Response, next: NextFunction) => {
    const key = req.principal?.apiKeyId;
    if (!key) return next();
    limiter.consume(key).then(
      (r) => {
        res.setHeader('X-RateLimit-Limit', String(opts.burst));
        res.setHeader('X-RateLimit-Remaining', String(r.remainingPoints));
        next();
      },
      (r: unknown) => {
        if (!(r instanceof RateLimiterRes)) return next(r);
        const retryAfter = Math.max(1, Math.ceil(r.msBeforeNext / 1000));
        res.setHeader('X-RateLimit-Limit', String(opts.burst));
        res.setHeader('X-RateLimit-Remaining', '0');
        next(
          tooManyRequests(
            `Rate limit of this API key reached (${opts.perSecond}/s, bursts of ${opts.burst}); retry after ${retryAfter} s.`,
            retryAfter,
          ),
        );
      },
    );
  };
}
