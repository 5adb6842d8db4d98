/**
 * Work credentials: how a long-running piece of work (a batch, an evaluation) makes model calls
 * as the API key that created it, through the same gateway path, limits and billing as that key's
 * interactive calls, without Gantry ever storing the key's secret.
 *
 * A work credential is a Bearer token the control worker mints for a few minutes at a time:
 * `gantry-work.<api key id>.<kind>.<work id>.<expires>.<signature>`, the signature an HMAC over
 * those fields with the installation's signing key (platform/keyring.ts, current or previous),
 * as pre-signed URLs are signed. It works only while the key does: it resolves through
 * findPrincipalByApiKeyId on every call, so revoking the key (or ending its project or
 * membership) stops the work at its next call. The principal it resolves to carries the work it
 * is for, so the gateway can put interactive traffic first and bill the tokens as that work's.
 */
import type { Keyring } from './keyring';
import { WORK_KINDS, type WorkKind, type WorkTag } from '../shared/work-tag';

const PREFIX = 'gantry-work';
// Ids Gantry issues: a prefix and a UUID (platform/ids.ts); API key ids alike. No dots.
const ID = /^[A-Za-z0-9_-]{1,80}$/;

const payload = (apiKeyId: string, work: WorkTag, expires: number) =>
  ['v1-work', apiKeyId, work.kind, work.id, expires].join('\n');

/** A credential for calls of `work` as API key `apiKeyId`, valid for `ttlSeconds`. */
export function mintWorkCredential(
  keys: Keyring,
  apiKeyId: string,
  work: WorkTag,
  ttlSeconds: number,
  now = Date.now(),
): string {
  if (!ID.test(apiKeyId) || !ID.test(work.id)) throw new Error('work credential: an id that is not an id');
  const expires = Math.floor(now / 1000) + ttlSeconds;
  return [PREFIX, apiKeyId, work.kind, work.id, expires, keys.sign(payload(apiKeyId, work, expires))].join('.');
}

/** Whether a Bearer secret has the form of a work credential (then it is never an API key). */
export const isWorkCredential = (secret: string) => secret.startsWith(`${PREFIX}.`);

/**
 * The key and work a credential names, when its signature holds under `keys` and it has not
 * expired; null otherwise (the caller answers 401 as for an unknown key).
 */
export function readWorkCredential(
  keys: Keyring,
  secret: string,
  now = Date.now(),
): { apiKeyId: string; work: WorkTag } | null {
  const parts = secret.split('.');
  if (parts.length !== 6 || parts[0] !== PREFIX) return null;
  const [, apiKeyId, kind, id, expiresText, signature] = parts;
  if (!ID.test(apiKeyId) || !ID.test(id) || !(WORK_KINDS as readonly string[]).includes(kind)) return null;
  if (!/^\d{1,12}$/.test(expiresText) || !/^[0-9a-f]{64}$/.test(signature)) return null;
  const work: WorkTag = { kind: kind as WorkKind, id };
  const expires = Number(expiresText);
  if (!keys.verify(payload(apiKeyId, work, expires), signature)) return null;
  if (now / 1000 > expires) return null;
  return { apiKeyId, work };
}
