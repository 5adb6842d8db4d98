/**
 * Bearer-key authentication for every route. The key resolves to a Principal
 * (key, project, organization, roles); handlers scope every query by
 * principal.projectId, so another project's resources are simply not found.
 */
import type { IncomingMessage } from 'node:http';
import type { NextFunction, Request, Response } from 'express';
import { findPrincipalByApiKey, findPrincipalByApiKeyId, type Principal } from '../../db/accounts';
import type { Db } from '../../db/pool';
import type { PrincipalCache } from '../../db/principal-cache';
import type { Keyring } from '../../platform/keyring';
import { forbidden, unauthorized } from '../errors';
import { bindToRequestLog } from './request-context';
import { isWorkCredential, readWorkCredential } from '../../platform/work-credentials';

declare module 'express-serve-static-core' {
  interface Request {
    principal?: Principal;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;
// Longer than any key Gantry issues; anything bigger is not worth a lookup.
const MAX_KEY_LENGTH = 256;
/** The API's paths a batch's or an evaluation's calls may reach with a work credential. */
const WORK_PATHS = /^\/v1\/audio\/(transcriptions|translations)\/?$/;

/** Resolves an API key to its principal (the process's PrincipalCache, or a plain lookup); null when unknown. */
export type PrincipalLookup = (secret: string) => Promise<Principal | null>;

/**
 * The process's cache when it has one, else a lookup per request. A work credential (a batch's or
 * an evaluation's calls, platform/work-credentials.ts) resolves to its key's principal, looked up on every
 * call so a revoked key stops the work at once, with the work it is for.
 */
export function principalLookup(deps: {
  db: Db;
  principals?: PrincipalCache;
  config?: { keyring?: Keyring };
}): PrincipalLookup {
  const cache = deps.principals;
  const byKey: PrincipalLookup = cache
    ? (secret) => cache.lookup(secret)
    : (secret) => findPrincipalByApiKey(deps.db, secret);
  const keys = deps.config?.keyring;
  return async (secret) => {
    if (!isWorkCredential(secret)) return byKey(secret);
    const credential = keys ? readWorkCredential(keys, secret) : null;
    const principal = credential ? await findPrincipalByApiKeyId(deps.db, credential.apiKeyId) : null;
    return principal && { ...principal, work: credential!.work };
  };
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
      // A work credential makes the model calls of its work, nothing else: speech here (chat is the gateway's).
      if (principal.work && !WORK_PATHS.test(req.path))
        throw forbidden('A work credential only makes model calls.', 'work_credential_scope');
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
