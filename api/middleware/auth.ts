/**
 * Bearer-key authentication for every route. The key resolves to a Principal
 * (key, project, organization, roles); handlers scope every query by
 * principal.projectId, so another project's resources are simply not found.
 */
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { findPrincipalByApiKey, type Principal } from '../../db/accounts';
import type { Db } from '../../db/pool';
import type { PrincipalCache } from '../../db/principal-cache';
import { forbidden, unauthorized } from '../errors';
import { bindToRequestLog } from './request-context';

declare module 'express-serve-static-core' {
  interface Request {
    principal?: Principal;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
// Longer than any key Gantry issues; anything bigger is not worth a lookup.
const MAX_KEY_LENGTH = 256;

/** Resolves an API key to its principal (the process's PrincipalCache, or a plain lookup); null when unknown. */
export type PrincipalLookup = (secret: string) => Promise<Principal | null>;

/** The process's cache when it has one, else a lookup per request. */
export function principalLookup(deps: { db: Db; principals?: PrincipalCache }): PrincipalLookup {
  const cache = deps.principals;
  return cache ? (secret) => cache.lookup(secret) : (secret) => findPrincipalByApiKey(deps.db, secret);
}

/** The principal of an `Authorization: Bearer <key>` header; throws the 401 a caller sees otherwise. */
export async function principalOf(header: string | undefined, lookup: PrincipalLookup): Promise<Principal> {
  if (!header) {
    throw unauthorized('Missing API key. Send it as `Authorization: Bearer <API_KEY>`.');
  }
  const match = BEARER.exec(header);
  if (!match) {
    throw unauthorized('Malformed Authorization header. Expected `Authorization: Bearer <API_KEY>`.');
  }
  const secret = match[1];
  const principal = secret.length <= MAX_KEY_LENGTH ? await lookup(secret) : null;
  if (!principal) throw unauthorized('Invalid API key.');
  return principal;
}

/** Express middleware: sets `req.principal`, and binds the project and key to the request's log lines. */
export function authenticate(lookup: PrincipalLookup) {
  return async (req: Request, _res: Response, next: NextFunction) => {
    try {
      const principal = await principalOf(req.headers.authorization, lookup);
      req.principal = principal;
      bindPrincipalToLog(req, principal);
      next();
    } catch (err) {
      next(err);
    }
  };
}

/** Every later log line of the request names the project and the key. */
export function bindPrincipalToLog(req: IncomingMessage, principal: Principal): void {
  bindToRequestLog(req, { project: principal.projectId, apiKeyId: principal.apiKeyId });
}

export type Access = 'project' | 'platform-admin';

export function checkAccess(principal: Principal, access: Access): void {
  if (access === 'platform-admin' && !principal.isPlatformAdmin) {
    throw forbidden('This route is for operators of this Gantry installation.', 'platform_admin_required');
  }
}
