/**
 * A TCP pass-through in Node: each client connection piped to a connection of its own to the
 * upstream, bytes both ways, no HTTP parsed. Not a proxy anyone could use as a gateway (it cannot
 * see a request, so it cannot authenticate or route one); the gateway bench's third reference,
 * which measures what Node's sockets and event loop cost on this machine apart from its HTTP
 * layer, the other two being nginx and the leanest Node HTTP proxy (bare-node-proxy.ts).
 *
 *   BARE_PIPE_PORT=<listen port> BARE_PIPE_UPSTREAM=<upstream port> node --require tsx/cjs bench/lib/bare-node-tcp-pipe.ts
 */
import { connect, createServer } from 'node:net';

const upstream = Number(process.env.BARE_PIPE_UPSTREAM);

createServer((client) => {
  const far = connect(upstream, '127.0.0.1');
  client.setNoDelay(true);
  far.setNoDelay(true);
  client.pipe(far).pipe(client);
  client.on('error', () => far.destroy());
  far.on('error', () => client.destroy());
}).listen(Number(process.env.BARE_PIPE_PORT), '127.0.0.1');
