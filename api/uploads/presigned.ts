/**
 * Pre-signed upload URLs for the official SDKs' flow (POST /files answers 302
 * to a URL that takes a PUT of the bytes without an API key). A URL is bound
 * to one file, one token, a size bound and an expiry, all under an HMAC with the
 * installation's signing key (platform/keyring.ts, current or previous); the
 * token is single-use in PostgreSQL, so a URL cannot be replayed. Multipart
 * part URLs are signed the same way and also name their part; a part may be
 * sent again (a retry) until its upload completes, never after.
 */
import { z } from 'zod';
import { findPrincipalByApiKeyId, type Principal } from '../../db/accounts';
import type { Queryable } from '../../db/pool';
import type { Keyring } from '../../platform/keyring';
import { forbidden } from '../errors';
import { parseOrThrow } from '../validation';

export interface UploadGrant {
  fileId: string;
  tokenId: string;
  maxBytes: number;
  /** Exact size when the client declared it; otherwise only the bound applies. */
  exactBytes: number | null;
  /** Unix seconds. */
  expires: number;
  /** Multipart uploads: the part this URL takes (the token is then the upload id). */
  part?: number;
}

function signedPayload(g: UploadGrant): string {
  return ['v1', g.fileId, g.tokenId, g.maxBytes, g.exactBytes ?? '', g.expires, g.part ?? ''].join('\n');
}

export function uploadUrl(publicUrl: string, keys: Keyring, g: UploadGrant): string {
  const q = new URLSearchParams({
    token: g.tokenId,
    max_bytes: String(g.maxBytes),
    expires: String(g.expires),
    signature: keys.sign(signedPayload(g)),
  });
  if (g.exactBytes !== null) q.set('bytes', String(g.exactBytes));
  const file = `${publicUrl}/v1/files/${encodeURIComponent(g.fileId)}`;
  return g.part === undefined ? `${file}/upload?${q}` : `${file}/parts/${g.part}?${q}`;
}

export const UploadUrlQuery = z.object({
  token: z.string().min(1).max(64),
  max_bytes: z.coerce.number().int().positive(),
  bytes: z.coerce.number().int().nonnegative().optional(),
  expires: z.coerce.number().int().positive(),
  signature: z.string().regex(/^[0-9a-f]{64}$/),
});

/** Checks signature and expiry; the caller then consumes the token once. */
export function verifyUploadUrl(
  keys: Keyring,
  fileId: string,
  query: unknown,
  part?: number,
  now = Date.now(),
): UploadGrant {
  const q = parseOrThrow(UploadUrlQuery, query, 'query', true);
  const grant: UploadGrant = {
    fileId,
    tokenId: q.token,
    maxBytes: q.max_bytes,
    exactBytes: q.bytes ?? null,
    expires: q.expires,
    ...(part === undefined ? {} : { part }),
  };
  if (!keys.verify(signedPayload(grant), q.signature)) {
    throw forbidden('The upload URL is not valid (its signature does not match).', 'invalid_signature');
  }
  if (now / 1000 > q.expires) {
    throw forbidden('The upload URL has expired. Start the upload again with POST /v1/files.', 'upload_url_expired');
  }
  return grant;
}

/**
 * Pre-signed download URLs: an HMAC over the resource path, the key that asked for the URL and
 * the expiry. Used where a client expects a URL it can fetch without its API key. The URL is a
 * credential of that key and works only while the key does (not revoked, its project still
 * there, its person still in the project): revoking a key ends its URLs at once, not when they
 * expire.
 */
const downloadPayload = (resourcePath: string, keyId: string, expires: number) =>
  ['v2-download', resourcePath, keyId, expires].join('\n');

export function downloadUrl(
  publicUrl: string,
  keys: Keyring,
  resourcePath: string,
  keyId: string,
  expires: number,
): string {
  const q = new URLSearchParams({
    key_id: keyId,
    expires: String(expires),
    signature: keys.sign(downloadPayload(resourcePath, keyId, expires)),
  });
  return `${publicUrl}${resourcePath}?${q}`;
}

export const DownloadUrlQuery = z.object({
  key_id: z.string().min(1).max(128).meta({ description: 'The API key the URL was made for' }),
  expires: z.coerce.number().int().positive(),
  signature: z.string().regex(/^[0-9a-f]{64}$/),
});

/**
 * Checks the signature and expiry, then that the key the URL was made for still works. Answers
 * that key's principal: the caller serves only what its project owns.
 */
export async function verifyDownloadUrl(
  keys: Keyring,
  db: Queryable,
  resourcePath: string,
  query: unknown,
  now = Date.now(),
): Promise<Principal> {
  const q = parseOrThrow(DownloadUrlQuery, query, 'query', true);
  if (!keys.verify(downloadPayload(resourcePath, q.key_id, q.expires), q.signature)) {
    throw forbidden('The download URL is not valid (its signature does not match).', 'invalid_signature');
  }
  if (now / 1000 > q.expires)
    throw forbidden('The download URL has expired; ask for a new one.', 'download_url_expired');
  const principal = await findPrincipalByApiKeyId(db, q.key_id);
  if (!principal) {
    throw forbidden(
      'The API key this download URL was made for no longer works (revoked, or its project or membership ended); ' +
        'ask for a new URL with a key that works.',
      'download_url_key_revoked',
    );
  }
  return principal;
}

/**
 * Pre-signed PUT URLs of a resource path: each part of a model file upload, and a storage object
 * (the CLI PUTs to one without its API key). An HMAC over the path, the most bytes it may hold and
 * the expiry; the path names the resource, so a URL for one never fits another.
 */
const partPayload = (resourcePath: string, maxBytes: number, expires: number) =>
  ['v1-model-part', resourcePath, maxBytes, expires].join('\n');

export function partUploadUrl(
  publicUrl: string,
  keys: Keyring,
  resourcePath: string,
  maxBytes: number,
  expires: number,
): string {
  const q = new URLSearchParams({
    max_bytes: String(maxBytes),
    expires: String(expires),
    signature: keys.sign(partPayload(resourcePath, maxBytes, expires)),
  });
  return `${publicUrl}${resourcePath}?${q}`;
}

export const PartUploadUrlQuery = z.object({
  max_bytes: z.coerce.number().int().positive(),
  expires: z.coerce.number().int().positive(),
  signature: z.string().regex(/^[0-9a-f]{64}$/),
});

/** Checks the signature and expiry; answers the most bytes the part may hold. */
export function verifyPartUploadUrl(keys: Keyring, resourcePath: string, query: unknown, now = Date.now()): number {
  const q = parseOrThrow(PartUploadUrlQuery, query, 'query', true);
  if (!keys.verify(partPayload(resourcePath, q.max_bytes, q.expires), q.signature)) {
    throw forbidden('The upload URL is not valid (its signature does not match).', 'invalid_signature');
  }
  if (now / 1000 > q.expires) {
    throw forbidden('The upload URL has expired. Start the upload again.', 'upload_url_expired');
  }
  return q.max_bytes;
}
