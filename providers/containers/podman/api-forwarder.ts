/**
 * The one door out of a project's bridge: an HTTP forwarder on the bridge's
 * gateway address that passes requests to Gantry's API, so replicas that are
 * queue workers (or call the API for any reason) reach it, with their API key
 * like any client, while every other address stays unreachable
 * (replica-networks.ts lets this port through and drops the rest).
 *
 * It forwards HTTP, not bytes, to say who called: `X-Forwarded-For` is the
 * replica's own address (whatever the replica claimed is replaced). An API that
 * trusts this host (GANTRY_TRUST_PROXY) then limits each replica by its address,
 * where a byte forwarder made every project's replicas on a host one client of
 * one address limit.
 *
 * The bridge's address exists only once its first container has started
 * (Podman creates the bridge then), so the forwarder keeps trying to listen
 * until it can, or until it is closed. A replica's connection before that is
 * refused, as for an API that is restarting; the worker kit retries.
 */
import { createServer, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { ForwardFailed, forwardedHeaders, forwardRequest } from '../../../platform/http-forward';

/**
 * Kept-alive connections to the API, shared by a host's forwarders. No timeouts of its own: a claim
 * long-polls and a log follows for as long as the API keeps them.
 */
const apiAgent = new Agent({ connections: 64, headersTimeout: 0, bodyTimeout: 0 });

export class ApiForwarder {
  private server?: Server;
  private closed = false;

  constructor(
    /** The bridge's gateway address, where replicas connect. */
    readonly listenHost: string,
    /** The API as this host reaches it. */
    private readonly target: { host: string; port: number },
  ) {}

  /** The port replicas connect to: the API's own, so the URL reads naturally. */
  get port(): number {
    return this.target.port;
  }

  /** Listens as soon as the bridge has its address; resolves when listening or closed. */
  async start(): Promise<void> {
    while (!this.closed && !this.server) {
      const origin = `http://${this.target.host.includes(':') ? `[${this.target.host}]` : this.target.host}:${this.target.port}`;
      const server = createServer((req, res) => {
        const headers = forwardedHeaders(req, { forwardedFor: req.socket.remoteAddress ?? '' });
        forwardRequest(req, res, { agent: apiAgent, origin, path: req.url ?? '/', headers }).catch((err: Error) => {
          if (res.headersSent) return res.destroy();
          res.writeHead(502, { 'content-type': 'application/json' });
          const message = err instanceof ForwardFailed ? `Gantry's API did not answer: ${err.message}` : err.message;
          res.end(JSON.stringify({ error: { message, type: 'api_error', code: 'bad_gateway' } }));
        });
      });
      // Uploads and long polls take as long as they take; the API has its own limits.
      server.requestTimeout = 0;
      const bound = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(this.target.port, this.listenHost, () => resolve(true));
      });
      if (bound && !this.closed) {
        server.unref(); // never what keeps a worker process from exiting
        this.server = server;
      } else {
        server.close();
        // Not yet: the bridge appears when its first container starts.
        if (!this.closed) await sleep(100, undefined, { ref: false });
      }
    }
  }

  close(): void {
    this.closed = true;
    this.server?.close();
    this.server = undefined;
  }
}
