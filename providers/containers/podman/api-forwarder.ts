/**
 * The one door out of a project's bridge: a TCP forwarder on the bridge's
 * gateway address that passes connections to Gantry's API, so replicas that
 * are queue workers (or call the API for any reason) reach it, with their API
 * key like any client, while every other address stays unreachable
 * (replica-networks.ts lets this port through and drops the rest).
 *
 * The bridge's address exists only once its first container has started
 * (Podman creates the bridge then), so the forwarder keeps trying to listen
 * until it can, or until it is closed. A replica's connection before that is
 * refused, as for an API that is restarting; the worker kit retries.
 */
import { createServer, connect, type Server } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

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
      const server = createServer((inbound) => {
        const outbound = connect(this.target);
        inbound.pipe(outbound).pipe(inbound);
        inbound.on('error', () => outbound.destroy());
        outbound.on('error', () => inbound.destroy());
      });
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
