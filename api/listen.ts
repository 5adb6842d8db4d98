import type { Server } from 'node:http';
import type { Express } from 'express';

/** Listens on host:port; `close()` stops accepting and resolves once in-flight requests are done. */
export async function listen(
  app: Express,
  port: number,
  host: string,
): Promise<{ server: Server; close(): Promise<void> }> {
  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(port, host, () => resolve(s)).on('error', reject);
  });
  return { server, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
