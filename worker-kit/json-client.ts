/**
 * A small JSON-over-HTTP client on Node's own http and https modules, for the worker library: one
 * kept-alive connection reused for every call (a worker makes one call at a time, plus its
 * keep-alive updates), no dependencies. fetch would do, at several times the CPU per call.
 */
import http from 'node:http';
import https from 'node:https';

export interface Answer {
  status: number;
  /** The body as text ('' when there is none). */
  text: string;
  /** The Retry-After header, when the API sent one. */
  retryAfter?: string;
}

/**
 * A call whose connection is silent this long is given up (a server gone without closing it): the
 * longest wait the API holds a claim for is 20 s.
 */
const SILENCE_MS = 80_000;

export class JsonClient {
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly transport: typeof http | typeof https;

  /** `connections`: how many calls may be under way at once, each on its own kept-alive socket. */
  constructor(baseUrl: string, { connections = 4 }: { connections?: number } = {}) {
    this.base = new URL(baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
    this.transport = this.base.protocol === 'https:' ? https : http;
    // Free sockets are unref'd by the agent: an idle worker does not keep its process alive.
    this.agent = new this.transport.Agent({ keepAlive: true, maxSockets: connections });
  }

  /** POSTs `body` as JSON with the key; rejects only when no answer came (connection refused, reset). */
  post(path: string, apiKey: string, body: object): Promise<Answer> {
    return this.request('POST', path, {
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: Buffer.from(JSON.stringify(body)),
    });
  }

  /** Any call on the kept-alive connections; rejects only when no answer came. */
  request(
    method: string,
    path: string,
    { headers = {}, body }: { headers?: Record<string, string>; body?: Buffer } = {},
  ): Promise<Answer> {
    const url = new URL(path.replace(/^\/+/, ''), this.base);
    return new Promise<Answer>((resolve, reject) => {
      const req = this.transport.request(
        url,
        {
          method,
          agent: this.agent,
          headers: body ? { ...headers, 'content-length': body.length } : headers,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', reject);
          res.on('end', () => {
            const retryAfter = res.headers['retry-after'];
            resolve({
              status: res.statusCode ?? 0,
              text: Buffer.concat(chunks).toString('utf8'),
              ...(typeof retryAfter === 'string' ? { retryAfter } : {}),
            });
          });
        },
      );
      req.setTimeout(SILENCE_MS, () => req.destroy(new Error(`no answer within ${SILENCE_MS / 1000} s`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.agent.destroy();
  }
}
