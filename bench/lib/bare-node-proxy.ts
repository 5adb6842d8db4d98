/**
 * The leanest reverse proxy Node runs: `http.createServer` in front of an undici pool, headers
 * copied, the answer piped back; no authentication, routing, limits, logs or metrics. The
 * gateway bench's second reference: what a proxy written in Node costs on this machine before
 * any of Gantry's own work, so the gap to nginx can be split into the runtime's and Gantry's.
 *
 *   BARE_PROXY_PORT=<listen port> BARE_PROXY_UPSTREAM=<upstream port> node --require tsx/cjs bench/lib/bare-node-proxy.ts
 */
import { createServer } from 'node:http';
import { Agent } from 'undici';

const port = Number(process.env.BARE_PROXY_PORT);
const upstream = Number(process.env.BARE_PROXY_UPSTREAM);
const agent = new Agent({ connections: 256, headersTimeout: 0, bodyTimeout: 0 });
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'expect']);

function copy(headers: Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

createServer((req, res) => {
  const headers = copy(req.headers);
  delete headers.host;
  agent
    .request({
      origin: `http://127.0.0.1:${upstream}`,
      path: req.url ?? '/',
      method: (req.method ?? 'GET') as 'GET',
      headers,
      body: req.headers['content-length'] || req.headers['transfer-encoding'] ? req : null,
    })
    .then(
      (answer) => {
        res.writeHead(answer.statusCode, copy(answer.headers));
        answer.body.pipe(res);
      },
      () => res.writeHead(502).end(),
    );
}).listen(port, '127.0.0.1');
