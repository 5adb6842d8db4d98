/**
 * The call key a batch's or evaluation's request names (`x-gantry-work-call`, shared/work-calls.ts),
 * read the one way by the gateway and the API. Only a work credential's calls are named: from a
 * user's own key the header means nothing.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Principal } from '../db/accounts';
import { WORK_CALL_HEADER, WORK_CALL_KEY } from '../shared/work-calls';
import { badRequest } from './errors';

/** The key, or undefined when the call is not a named work call; 400 when the header is not a key. */
export function workCallKey(headers: IncomingHttpHeaders, principal: Pick<Principal, 'work'>): string | undefined {
  const value = headers[WORK_CALL_HEADER];
  if (!principal.work || value === undefined) return undefined;
  if (typeof value !== 'string' || !WORK_CALL_KEY.test(value))
    throw badRequest(`${WORK_CALL_HEADER} is not a call key.`, WORK_CALL_HEADER);
  return value;
}
