/**
 * Fetching a URL a user gave us (a model to import, audio to transcribe). Only
 * http and https; the host must resolve to public addresses unless the
 * installation allows private ones (GANTRY_REMOTE_FETCH_ALLOW_PRIVATE), so a
 * URL cannot be used to reach the platform's own network.
 *
 * The check happens where the connection is made: the agent's DNS lookup
 * refuses a name with any non-public address, so the address connected to is
 * the address checked (a name cannot resolve to a public address for the
 * check and to a private one for the connection). IP literals are checked
 * when the URL is, in every spelling (IPv4-mapped IPv6 included). Redirects
 * are followed by hand and each hop is checked the same way; the token goes
 * in the Authorization header, and only to the origin it was given for.
 */
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import ipaddr from 'ipaddr.js';
import { Agent, fetch, type RequestInit, type Response } from 'undici';
import type { RemoteFetchPolicy } from '../../platform/config';

export class RemoteFetchRefused extends Error {}

const MAX_REDIRECTS = 5;

/**
 * Whether an address is on the public internet: ordinary unicast, not loopback, private,
 * link-local, carrier-grade NAT, multicast, reserved, documentation or a translation range
 * (NAT64, 6to4, Teredo), whichever way it is written (IPv4-mapped IPv6 is read as its IPv4).
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address);
  // IPv4-compatible IPv6 (::a.b.c.d, deprecated by RFC 4291), which ipaddr.js calls unicast: some
  // stacks still route it to the IPv4 address it embeds, 127.0.0.1 included.
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).parts.slice(0, 6).every((p) => p === 0)) return false;
  return parsed.range() === 'unicast';
}

const refusal = (host: string, address: string) =>
  new RemoteFetchRefused(
    `${host} resolves to a private address (${address}); this installation fetches public URLs only.`,
  );

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** dns.lookup for the connection itself: every address of the name must be public. */
function publicOnlyLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, []);
    const bad = addresses.find((a) => !isPublicAddress(a.address));
    if (bad) return callback(refusal(hostname, bad.address), []);
    if (options.all) return callback(null, addresses);
    callback(null, addresses[0].address, addresses[0].family);
  });
}

/** Connections of remote fetches under the public-only policy. */
const publicOnly = new Agent({ connect: { lookup: publicOnlyLookup } });

/**
 * fetch() through the agent the policy asks for; a refusal made while connecting comes out as
 * RemoteFetchRefused (fetch wraps it in a TypeError).
 */
export async function remoteFetch(url: URL, policy: RemoteFetchPolicy, init: RequestInit = {}): Promise<Response> {
  try {
    return await fetch(url, { ...init, dispatcher: policy.allowPrivateHosts ? undefined : publicOnly });
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof RemoteFetchRefused) throw cause;
    throw err;
  }
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
    // Early and clear for the caller (the API answers 400); the connection checks again.
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
    const bad = addresses.find((a) => !isPublicAddress(a));
    if (bad !== undefined) throw refusal(url.hostname, bad);
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
  const tokenOrigin = url.origin;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const res = await remoteFetch(url, policy, {
      redirect: 'manual',
      signal: opts.signal,
      // A redirect to another origin does not get the token meant for this one.
      headers: opts.token && url.origin === tokenOrigin ? { authorization: `Bearer ${opts.token}` } : {},
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
