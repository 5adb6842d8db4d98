/**
 * An HTTP server of the crash test's that outlives the platform and holds some of its answers
 * mid-way: for a request it is told to hold, it sends the headers and the first part of the body,
 * then keeps the rest until release() (the platform up again). A download through it is mid-way at
 * the kill by construction, not by a race with the clock. It answers from its own bodies, or passes
 * each request on to an upstream server (a registry) and answers what that said.
 */
import { createServer, request, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buffer } from 'node:stream/consumers';

export interface HeldAnswers {
  /** host:port, as a URL or an image reference names it. */
  address: string;
  /** Answers held (their headers and first part sent) so far. */
  firstPartsSent(): number;
  /** Of those, the ones whose client went before the rest was sent (a killed platform drops them). */
  droppedWhileHeld(): number;
  /** The requests it answered, `METHOD path`, in order. */
  requests(): string[];
  /** Sends the rest of every held answer, and answers whole from now on. */
  release(): void;
  close(): Promise<void>;
}

export async function startHeldAnswers(opts: {
  /** What to answer, by path (404 for any other), unless `upstream` answers. */
  bodies?: Record<string, Buffer>;
  /** An origin (http://host:port) every request is passed on to. */
  upstream?: string;
  /** Which requests to hold while not released. */
  holds: (req: IncomingMessage) => boolean;
  /** How much of a held body goes before the hold (default: half). */
  firstPart?: (body: Buffer) => number;
}): Promise<HeldAnswers> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let isReleased = false;
  const releaseAll = () => {
    isReleased = true;
    release();
  };
  let sent = 0;
  let dropped = 0;
  const seen: string[] = [];

  /** The upstream's answer, whole (a manifest or a layer: small enough to hold in memory). */
  const passOn = (req: IncomingMessage, body: Buffer) =>
    new Promise<{ status: number; headers: OutgoingHttpHeaders; body: Buffer }>((resolve, reject) => {
      const headers = { ...req.headers };
      delete headers.host;
      const up = request(
        `${opts.upstream}${req.url}`,
        { method: req.method, headers: { ...headers, 'content-length': String(body.length) } },
        (res) => {
          buffer(res).then((b) => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: b }), reject);
        },
      );
      up.on('error', reject);
      up.end(body);
    });

  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    void (async () => {
      const answer = opts.upstream
        ? await passOn(req, await buffer(req))
        : opts.bodies?.[req.url ?? '']
          ? { status: 200, headers: {}, body: opts.bodies[req.url!] }
          : { status: 404, headers: {}, body: Buffer.alloc(0) };
      const headers = { ...answer.headers };
      // What a HEAD's answer says its body would be, as the upstream said it; else the body held here.
      if (req.method !== 'HEAD') headers['content-length'] = String(answer.body.length);
      delete headers['transfer-encoding'];
      delete headers.connection;
      res.writeHead(answer.status, headers);
      if (req.method === 'HEAD') return res.end();
      if (isReleased || answer.status !== 200 || !opts.holds(req)) return res.end(answer.body);
      const first = opts.firstPart?.(answer.body) ?? answer.body.length >> 1;
      res.write(answer.body.subarray(0, first), () => sent++);
      let gone = false;
      res.on('close', () => {
        if (!res.writableFinished) {
          gone = true;
          dropped++;
        }
      });
      await released;
      if (!gone) res.end(answer.body.subarray(first));
    })().catch((err: Error) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(String(err.message));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    firstPartsSent: () => sent,
    droppedWhileHeld: () => dropped,
    requests: () => [...seen],
    release: releaseAll,
    async close() {
      releaseAll();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
