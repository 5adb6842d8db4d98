/**
 * Passing one HTTP request on to another server and its answer back, streamed both ways: the
 * gateway's hop to a replica (gateway/proxy.ts) and a container host's hop from its replicas to
 * the API (providers/containers/podman/api-forwarder.ts). One place for what every such hop must
 * get right: hop-by-hop headers stay behind, the far request ends when the caller goes away, and a
 * far side that fails mid-answer ends the caller's answer too.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
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
  // Left out as it is copied, not deleted after: a deleted property puts the object V8 hands to
  // undici in its slow dictionary mode.
  for (const name in req.headers) {
    const value = req.headers[name];
    if (value === undefined || name === 'host' || HOP_BY_HOP.has(name) || opts.drop?.includes(name)) continue;
    headers[name] = value;
  }
  headers['x-forwarded-for'] = opts.forwardedFor;
  return headers;
}

/**
 * Sends `req` to `origin` + `path` through `agent` and streams the answer to `res` as it comes
 * (server-sent events included). The far request is aborted when the caller goes away. Throws
 * ForwardFailed when the far side cannot be reached; answers 'refused' instead (writing nothing)
 * when `retryable` and the connection was refused, so the caller can try elsewhere.
 *
 * Through undici's dispatch, not `request`: each chunk of the answer goes straight to `res`, with no
 * body stream, pipe or AbortSignal in between. Those cost about 20 of the gateway's 130 µs of CPU on
 * a proxied GET /health, on the bench machine.
 */
export function forwardRequest(
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
  return new Promise((resolve, reject) => {
    let abortFar: ((err: Error) => void) | undefined;
    let callerGone = false;
    let answering = false;
    let resumeFar: (() => void) | undefined;
    // Methods of one object, not named arrows: tsx's esbuild (keepNames) gives every named arrow a
    // name with Object.defineProperty each time it is made, 2% of the gateway's CPU here.
    const caller = {
      closed() {
        if (res.writableFinished) return;
        callerGone = true;
        abortFar?.(new Error('the caller went away'));
      },
      drained() {
        resumeFar?.();
      },
      settle() {
        res.off('close', caller.closed);
        res.off('drain', caller.drained);
      },
    };
    res.once('close', caller.closed);
    opts.agent.dispatch(
      {
        origin: opts.origin,
        path: opts.path,
        method: (req.method ?? 'GET') as 'GET',
        headers,
        body: opts.body ?? (hasBody(req) ? req : null),
      },
      {
        // Called again when undici retries the request on another connection.
        onConnect(abort) {
          abortFar = abort;
          if (callerGone) abort(new Error('the caller went away'));
        },
        onHeaders(statusCode, rawHeaders, resume) {
          if (statusCode < 200) return true; // 1xx: the final answer is still to come
          answering = true;
          resumeFar = resume;
          res.on('drain', caller.drained);
          res.writeHead(statusCode, endToEndHeaders(rawHeaders));
          return true;
        },
        onData(chunk) {
          opts.tap?.(chunk);
          // false pauses the far side until the caller has taken what was written (caller.drained).
          return res.write(chunk);
        },
        onComplete() {
          caller.settle();
          res.end();
          resolve('sent');
        },
        onError(err) {
          caller.settle();
          // A far side that fails mid-answer ends the caller's answer too; a caller who left has no one to answer.
          if (answering || callerGone) {
            if (!res.writableFinished) res.destroy();
            resolve('sent');
          } else if (opts.retryable && (err as NodeJS.ErrnoException).code === 'ECONNREFUSED') resolve('refused');
          else reject(new ForwardFailed(err.message));
        },
      },
    );
  });
}

/** The far side's answer headers (undici's raw name/value pairs) less the hop-by-hop ones, for writeHead. */
function endToEndHeaders(raw: Buffer[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toString('latin1');
    if (!HOP_BY_HOP.has(name.toLowerCase())) out.push(name, raw[i + 1].toString('latin1'));
  }
  return out;
}
