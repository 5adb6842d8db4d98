import { createServer, type RequestListener, type Server, type ServerResponse } from 'node:http';

/** How long in-flight requests get to finish when a server closes (a claim long-polls up to 20 s). */
export const CLOSE_GRACE_MS = 25_000;

/**
 * Listens on host:port; `close()` stops accepting and resolves once in-flight requests are done
 * (see `closeGracefully`).
 */
export async function listen(
  /** An Express app (the API) or a plain handler (the gateway). */
  handler: RequestListener,
  port: number,
  host: string,
): Promise<{ server: Server; close(): Promise<void> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject).listen(port, host, () => resolve());
  });
  const close = closeGracefully(server);
  return { server, close };
}

/**
 * Prepares `server` to close gracefully and returns the function that closes it. `server.close()`
 * alone stops accepting connections but keeps serving requests on the open keep-alive ones, so a
 * client that asks again at once (a queue worker's next claim) held the server open for minutes.
 * Once closing, every response still to be sent says `Connection: close`, so each connection ends
 * after its current request; what is still open after `graceMs` is cut.
 */
export function closeGracefully(server: Server, graceMs = CLOSE_GRACE_MS): () => Promise<void> {
  const unanswered = new Set<ServerResponse>();
  let closing = false;
  // Before the app's own listener, so the header is set before any response can be sent.
  server.prependListener('request', (_req, res: ServerResponse) => {
    if (closing) res.setHeader('connection', 'close');
    unanswered.add(res);
    res.once('close', () => unanswered.delete(res));
  });
  return () =>
    new Promise<void>((resolve) => {
      closing = true;
      for (const res of unanswered) if (!res.headersSent) res.setHeader('connection', 'close');
      const cut = setTimeout(() => server.closeAllConnections(), graceMs);
      cut.unref();
      server.close(() => {
        clearTimeout(cut);
        resolve();
      });
      server.closeIdleConnections();
    });
}
