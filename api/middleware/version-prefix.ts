import type { NextFunction, Request, Response } from 'express';

/**
 * The two official SDKs read one TOGETHER_BASE_URL differently: the npm SDK's base ends in `/v1`
 * and its paths do not name a version (`/whoami`), while the Python SDK's base is the bare host
 * and its paths do (`/v1/files`, `/v2/projects/...`, `/v3/whoami`). So that one setting,
 * `<gantry>/v1`, serves both, a versioned path under `/v1` is the same path without it:
 * `/v1/v3/whoami` is `/v3/whoami`.
 */
const DOUBLE_VERSION = /^\/v1(\/v[1-3](?:\/|$|\?))/;

export function collapseVersionPrefix(req: Request, _res: Response, next: NextFunction) {
  if (DOUBLE_VERSION.test(req.url)) req.url = req.url.slice('/v1'.length);
  next();
}
