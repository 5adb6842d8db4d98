/**
 * Fetching a URL a user gave us (a model to import). Only http and https; the
 * host must resolve to public addresses unless the installation allows private
 * ones (GANTRY_REMOTE_FETCH_ALLOW_PRIVATE), so a URL cannot be used to reach the
 * platform's own network; redirects are followed by hand and each hop is
 * checked the same way. Credentials go in the Authorization header only.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import type { RemoteFetchPolicy } from '../../common/config';

export class RemoteFetchRefused extends Error {}

const MAX_REDIRECTS = 5;

/** Loopback, private, link-local, carrier-grade NAT, multicast and unspecified ranges (v4 and v6). */
export function isPrivateAddress(address: string): boolean {
  if (isIP(address) === 4) {
    const [a, b] = address.split('.').map(Number);
    return (
      a === 0 ||
      a === 10 ||
      a === 127 ||
      (a === 100 && b >= 64 && b < 128) ||
      (a === 169 && b === 254) ||
      (a === 172 && b >= 16 && b < 32) ||
      (a === 192 && b === 168) ||
      a >= 224
    );
  }
  const v6 = address.toLowerCase();
  if (v6.startsWith('::ffff:')) return isPrivateAddress(v6.slice(7));
  return v6 === '::' || v6 === '::1' || /^f[cd]/.test(v6) || /^fe[89ab]/.test(v6) || v6.startsWith('ff');
}

/** Throws RemoteFetchRefused unless the URL may be fetched under the policy. */
export async function checkRemoteUrl(raw: string, policy: RemoteFetchPolicy): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new RemoteFetchRefused(`'${raw}' is not a URL.`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new RemoteFetchRefused(`Only http and https URLs can be fetched (got ${url.protocol}).`);
  if (url.username || url.password) throw new RemoteFetchRefused('Put credentials in `token`, not in the URL.');
  if (!policy.allowPrivateHosts) {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
    if (addresses.some(isPrivateAddress))
      throw new RemoteFetchRefused(
        `${url.hostname} resolves to a private address; this installation fetches public URLs only.`,
      );
  }
  return url;
}

export interface RemoteBody {
  url: URL;
  /** Content-Length when the server sent one. */
  length: number | null;
  body: Readable;
}

/** GET with the policy checked on every hop; the body as a Node stream. */
export async function fetchRemote(
  raw: string,
  policy: RemoteFetchPolicy,
  opts: { token?: string; signal?: AbortSignal } = {},
): Promise<RemoteBody> {
  let url = await checkRemoteUrl(raw, policy);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const res = await fetch(url, {
      redirect: 'manual',
      signal: opts.signal,
      headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
    });
    if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
      await res.body?.cancel();
      url = await checkRemoteUrl(new URL(res.headers.get('location')!, url).toString(), policy);
      continue;
    }
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      throw new RemoteFetchRefused(`${url.origin}${url.pathname} answered HTTP ${res.status}.`);
    }
    const length = res.headers.get('content-length');
    return {
      url,
      length: length ? Number(length) : null,
      body: Readable.fromWeb(res.body as unknown as WebReadableStream),
    };
  }
  throw new RemoteFetchRefused(`More than ${MAX_REDIRECTS} redirects.`);
}
