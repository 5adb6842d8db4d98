/**
 * Passing one HTTP request on to another server and its answer back, streamed both ways: the
 * gateway's hop to a replica (gateway/proxy.ts) and a container host's hop from its replicas to
 * the API (providers/containers/podman/api-forwarder.ts). One place for what every such hop must
 * get right: hop-by-hop headers stay behind, the far request ends when the caller goes away, and a
 * far side that fails mid-answer ends the caller's answer too.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { Agent } from 'undici';

/** Headers that are about one connection, not the request (RFC 9110 §7.6.1), and so are not passed on. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
  'expect', // answered by this server (100 Continue), not the far side's to answer again
]);

/** The far side could not be reached, or failed before its answer began. */
export class ForwardFailed extends Error {}

export const hasBody = (req: IncomingMessage) =>
  Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;

/**
 * The request's end-to-end headers, less `drop`, with `X-Forwarded-For` set to `forwardedFor`: the
 * address this hop vouches for, replacing whatever the caller claimed.
 */
export function forwardedHeaders(
  req: IncomingMessage,
  opts: { forwardedFor: string; drop?: string[] },
): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  }
  delete headers.host;
  for (const name of opts.drop ?? []) delete headers[name];
  headers['x-forwarded-for'] = opts.forwardedFor;
  return headers;
}

/**
 * Sends `req` to `origin` + `path` through `agent` and streams the answer to `res` as it comes
 * (server-sent events included). The far request is aborted when the caller goes away. Throws
 * ForwardFailed when the far side cannot be reached; answers 'refused' instead (writing nothing)
 * when `retryable` and the connection was refused, so the caller can try elsewhere.
 */
export async function forwardRequest(
  req: IncomingMessage,
  res: ServerResponse,
  opts: {
    agent: Agent;
    /** `http://<address>:<port>` of the far side. */
    origin: string;
    /** The far side's path, with the query. */
    path: string;
    headers: Record<string, string | string[]>;
    /** Replaces the request's own body (when this side read it). */
    body?: Buffer;
    retryable?: boolean;
    /** Sees each chunk of the answer as it passes. */
    tap?: (chunk: Buffer) => void;
  },
): Promise<'sent' | 'refused'> {
  const headers = opts.body ? { ...opts.headers, 'content-length': String(opts.body.length) } : opts.headers;
  const gone = new AbortController();
  const onClose = () => {
    if (!res.writableFinished) gone.abort();
  };
  res.once('close', onClose);
  try {
    let answer;
    try {
      answer = await opts.agent.request({
        origin: opts.origin,
        path: opts.path,
        method: (req.method ?? 'GET') as 'GET',
        headers,
        body: opts.body ?? (hasBody(req) ? req : null),
        signal: gone.signal,
      });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (opts.retryable && code === 'ECONNREFUSED') return 'refused';
      if (gone.signal.aborted) return 'sent'; // the caller left: nobody to answer
      throw new ForwardFailed((err as Error).message);
    }
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
    }
    res.writeHead(answer.statusCode, out);
    if (opts.tap) answer.body.on('data', opts.tap);
    await relay(answer.body, res);
    return 'sent';
  } finally {
    res.off('close', onClose);
  }
}

/**
 * Streams the far side's answer to the caller; a far side that fails mid-answer, or a caller that
 * leaves, ends the other side too. (Not stream.pipeline: it costs an AbortController and an
 * AbortError per call, a fifth of the gateway's own time on a small answer.)
 */
function relay(body: Readable, res: ServerResponse): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      res.off('close', callerLeft);
      resolve();
    };
    const callerLeft = () => {
      body.destroy();
      done();
    };
    body.once('error', () => {
      res.destroy();
      done();
    });
    body.once('end', done);
    res.once('close', callerLeft);
    body.pipe(res);
  });
}
