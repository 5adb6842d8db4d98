// Example replica (used by the deployment tests): an HTTP server on $PORT, run
// as a host process by the `process` runtime, or as the image
// gantry-examples/http-replica (Containerfile beside it) by the `podman` runtime. GET /health answers 200; GET /env?name=X answers the
// variable's value (a test checks that secrets arrive); GET /file?path=P answers
// the file P relative to the working directory (where volumes are mounted), 404 if absent; POST /log?text=T
// prints T to stdout (the log-streaming test); GET /headers echoes the request headers; POST /crash exits with
// code 3; GET /slow?ms=N answers after N milliseconds (the request-duration autoscaling test), and logs
// when it starts (with &tag=T) and when its caller leaves first (`slow request abandoned (T)`); GET /metrics exposes the gauge `inflight_requests` in Prometheus text
// format, and POST /set-metric?value=N sets it (the autoscaling tests drive it); GET /connect?host=H&port=P
// answers whether a TCP connection to H:P opens within a second (`connected`, or the error's code: the
// isolation tests probe what a replica can reach); POST /fill?path=P&bytes=N writes up to N bytes to the file P and answers
// how many it wrote and the error that stopped it (`{"written":…,"error":"EDQUOT"}`: the storage limit tests); GET
// /redirect?to=URL answers a 302 to URL, and with METRICS_REDIRECT=URL so does GET /metrics, each logging `redirected
// <path>` (the tests of what the host does with a replica's redirect). On SIGTERM it logs, waits DRAIN_MS (to exercise
// the grace period) and exits.
import { open, readFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { constants } from 'node:os';

const replica = process.env.GANTRY_REPLICA_ID ?? 'unknown';
let inflight = 0;
const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname === '/health') return res.end('ok');
  const redirectTo = url.pathname === '/redirect' ? url.searchParams.get('to') : null;
  const metricsRedirect = url.pathname === '/metrics' ? process.env.METRICS_REDIRECT : undefined;
  if (redirectTo || metricsRedirect) {
    console.log(`${replica}: redirected ${url.pathname}`);
    res.writeHead(302, { location: redirectTo || metricsRedirect });
    return res.end();
  }
  if (url.pathname === '/slow') {
    const timer = setTimeout(
      () => res.end(JSON.stringify({ replica })),
      Math.min(10_000, Number(url.searchParams.get('ms') ?? 0)),
    );
    // A caller that leaves before the answer (through the gateway too) shows here.
    const tag = url.searchParams.get('tag');
    if (tag) console.log(`${replica}: slow request started (${tag})`);
    res.on('close', () => {
      if (res.writableFinished) return;
      clearTimeout(timer);
      console.log(`${replica}: slow request abandoned (${tag ?? ''})`);
    });
    return;
  }
  if (url.pathname === '/env') return res.end(process.env[url.searchParams.get('name') ?? ''] ?? '');
  if (url.pathname === '/file') {
    readFile(url.searchParams.get('path') ?? '', 'utf8').then(
      (text) => res.end(text),
      (err) => {
        res.statusCode = 404;
        res.end(err.code ?? 'error');
      },
    );
    return;
  }
  if (url.pathname === '/connect') {
    const socket = connect({ host: url.searchParams.get('host') ?? '', port: Number(url.searchParams.get('port')) });
    const answer = (text) => {
      socket.destroy();
      if (!res.headersSent) res.end(text);
    };
    socket.setTimeout(1000, () => answer('ETIMEDOUT'));
    socket.once('connect', () => answer('connected'));
    socket.once('error', (err) => answer(err.code ?? 'error'));
    return;
  }
  if (url.pathname === '/fill' && req.method === 'POST') {
    fill(url.searchParams.get('path') ?? '', Number(url.searchParams.get('bytes') ?? 0)).then((result) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(result));
    });
    return;
  }
  if (url.pathname === '/log' && req.method === 'POST') {
    console.log(`${replica}: ${url.searchParams.get('text') ?? ''}`);
    return res.end('logged');
  }
  if (url.pathname === '/headers') {
    res.setHeader('content-type', 'application/json');
    return res.end(JSON.stringify(req.headers));
  }
  if (url.pathname === '/metrics') {
    res.setHeader('content-type', 'text/plain; version=0.0.4');
    return res.end(
      `# HELP inflight_requests Requests in progress.\n# TYPE inflight_requests gauge\ninflight_requests ${inflight}\n`,
    );
  }
  if (url.pathname === '/set-metric' && req.method === 'POST') {
    inflight = Number(url.searchParams.get('value') ?? 0);
    return res.end(String(inflight));
  }
  if (url.pathname === '/crash' && req.method === 'POST') {
    console.log(`${replica}: crashing on request`);
    res.end('bye');
    setTimeout(() => process.exit(3), 10);
    return;
  }
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ replica, greeting: process.env.GREETING ?? null }));
});
/** Writes zeros to `file`, a MiB at a time, until `bytes` are written or a write fails. */
async function fill(file, bytes) {
  const chunk = Buffer.alloc(1024 * 1024);
  let written = 0;
  let handle;
  try {
    handle = await open(file, 'w');
    while (written < bytes) {
      const { bytesWritten } = await handle.write(chunk, 0, Math.min(chunk.length, bytes - written));
      written += bytesWritten;
    }
    await handle.sync();
    return { written, error: null };
  } catch (err) {
    // Node names no code for some errors (EDQUOT: "Unknown system error -122"): the errno's name instead.
    const name = Object.entries(constants.errno).find(([, n]) => n === -err.errno)?.[0];
    return { written, error: name ?? err.code ?? String(err) };
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

// HOST: the image sets 0.0.0.0 (its port is published from the container's own address).
server.listen(Number(process.env.PORT), process.env.HOST ?? '127.0.0.1', () =>
  console.log(`${replica}: listening on ${process.env.PORT}`),
);
process.on('SIGTERM', () => {
  console.log(`${replica}: SIGTERM received, draining`);
  setTimeout(() => process.exit(0), Number(process.env.DRAIN_MS ?? 0));
});
