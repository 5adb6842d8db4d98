/**
 * One HTTP hop (platform/http-forward.ts), between real servers on loopback: what the gateway and
 * the container hosts' API forwarder rely on. An answer streams as it comes and is held back when
 * the caller reads slowly; a caller who leaves ends the far request; a far side that fails
 * mid-answer ends the caller's answer; hop-by-hop headers stay behind.
 */
import assert from 'node:assert/strict';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { ForwardFailed, forwardedHeaders, forwardRequest } from '../../platform/http-forward';

/** Each of these takes well under a second; one that hangs fails here, not at the runner's 300 s. */
const QUICK = { timeout: 10_000 };
const agent = new Agent({ connections: 8, headersTimeout: 0, bodyTimeout: 0 });
const servers: Server[] = [];
after(async () => {
  for (const s of servers) {
    s.close();
    s.closeAllConnections(); // a test that failed may have left a request open
  }
  await agent.destroy();
});

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A hop in front of `far`; each outcome of forwardRequest (or its error) is kept in `outcomes`. */
async function hop(far: string, opts: { retryable?: boolean } = {}) {
  const outcomes: Array<string> = [];
  // Resolves when the first forward has settled: how it ended is then known, and it ends once.
  let settle!: () => void;
  const settled = new Promise<void>((r) => (settle = r));
  const url = await listen((req, res) => {
    forwardRequest(req, res, {
      agent,
      origin: far,
      path: req.url ?? '/',
      headers: forwardedHeaders(req, { forwardedFor: '203.0.113.9', drop: ['authorization'] }),
      retryable: opts.retryable,
    }).then(
      (outcome) => {
        outcomes.push(outcome);
        settle();
        if (outcome === 'refused') res.writeHead(503).end('refused');
      },
      (err: Error) => {
        outcomes.push(err instanceof ForwardFailed ? 'ForwardFailed' : `other: ${err.message}`);
        settle();
        // (A forward that failed after the answer began has only the connection left to end.)
        if (res.headersSent) res.destroy();
        else res.writeHead(502).end(err.message);
      },
    );
  });
  return { url, outcomes, settled };
}

/** A raw GET through node:http, with the answer's status, raw headers and body. */
function get(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; rawHeaders: string[]; body: string }>((resolve, reject) => {
    request(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, rawHeaders: res.rawHeaders, body }));
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
}

test('headers and the answer pass as sent, less the hop-by-hop ones and the caller key', QUICK, async () => {
  let seen: IncomingMessage['headers'] = {};
  const far = await listen((req, res) => {
    seen = req.headers;
    res.setHeader('Set-Cookie', ['a=1', 'b=2']);
    res.setHeader('X-Far', 'yes');
    res.setHeader('Keep-Alive', 'timeout=77');
    res.writeHead(201).end('made');
  });
  const { url, outcomes } = await hop(far);
  const answer = await get(`${url}/things?x=1`, {
    authorization: 'Bearer secret',
    'x-caller': 'me',
    'x-forwarded-for': '10.0.0.1',
    te: 'trailers',
  });
  assert.equal(answer.status, 201);
  assert.equal(answer.body, 'made');
  const names = answer.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  assert.deepEqual(
    answer.rawHeaders.flatMap((v, i) => (answer.rawHeaders[i - 1]?.toLowerCase() === 'set-cookie' ? [v] : [])),
    ['a=1', 'b=2'],
    'a repeated header keeps each value',
  );
  assert.ok(names.includes('x-far'));
  assert.ok(!answer.rawHeaders.includes('timeout=77'), "the far side's Keep-Alive stays behind");
  assert.equal(seen['x-caller'], 'me');
  assert.equal(seen.authorization, undefined, "the caller's key stays behind");
  assert.equal(seen['x-forwarded-for'], '203.0.113.9', 'the address the hop vouches for, not what the caller claimed');
  assert.equal(seen.te, undefined, 'a hop-by-hop header stays behind');
  assert.deepEqual(outcomes, ['sent']);
});

test('an answer streams as it comes: the first chunk arrives before the far side ends', QUICK, async () => {
  let finish!: () => void;
  const ended = new Promise<void>((r) => (finish = r));
  const far = await listen((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write('data: one\n\n');
    void ended.then(() => res.end('data: two\n\n'));
  });
  const { url } = await hop(far);
  const chunks: string[] = [];
  await new Promise<void>((resolve, reject) => {
    request(`${url}/events`, { agent: false }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        chunks.push(c);
        if (chunks.length === 1) finish();
      });
      res.on('end', resolve);
    })
      .on('error', reject)
      .end();
  });
  assert.equal(
    chunks[0],
    'data: one\n\n',
    'the first event came through alone, while the far side still held the rest',
  );
  assert.equal(chunks.join(''), 'data: one\n\ndata: two\n\n');
});

test('a caller that reads slowly holds the far side back instead of the hop buffering the answer', QUICK, async () => {
  const total = 64 * 1024 * 1024;
  const chunk = Buffer.alloc(64 * 1024, 120);
  let written = 0;
  const far = await listen((_req, res) => {
    res.writeHead(200, { 'content-length': String(total) });
    const more = () => {
      while (written < total) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', more);
      }
      res.end();
    };
    more();
  });
  const { url } = await hop(far);
  let received = 0;
  await new Promise<void>((resolve, reject) => {
    request(`${url}/big`, { agent: false }, (res) => {
      res.once('data', (c: Buffer) => {
        received += c.length;
        res.pause();
        // The caller takes nothing for a while: the far side must soon stop being able to write.
        void sleep(800).then(() => {
          const writtenWhilePaused = written;
          assert.ok(
            writtenWhilePaused < total / 2,
            `the far side wrote ${writtenWhilePaused} of ${total} bytes while the caller read nothing`,
          );
          res.on('data', (c: Buffer) => (received += c.length));
          res.resume();
        });
      });
      res.on('end', resolve);
      res.on('error', reject);
    })
      .on('error', reject)
      .end();
  });
  assert.equal(received, total, 'every byte arrived once the caller read again');
});

test("a caller that leaves ends the far side's request", QUICK, async () => {
  let farClosed!: () => void;
  const closed = new Promise<void>((r) => (farClosed = r));
  let arrived!: () => void;
  const held = new Promise<void>((r) => (arrived = r));
  const far = await listen((req, res) => {
    res.on('close', farClosed);
    arrived();
    void req; // answers never: only the caller leaving ends it
  });
  const { url, outcomes, settled } = await hop(far);
  const caller = request(`${url}/slow`, { agent: false });
  caller.on('error', () => undefined);
  caller.end();
  await held;
  caller.destroy();
  await closed;
  await settled;
  assert.deepEqual(outcomes, ['sent'], 'nobody is left to answer: no error either');
});

test("a far side that fails mid-answer ends the caller's answer", QUICK, async () => {
  const far = await listen((_req, res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('partial');
    setTimeout(() => res.socket?.destroy(), 50);
  });
  const { url, outcomes, settled } = await hop(far);
  await assert.rejects(get(`${url}/broken`), (err: Error) => /aborted|socket hang up|ECONNRESET/.test(err.message));
  await settled;
  assert.deepEqual(outcomes, ['sent']);
});

test(
  "a far side that is not there: 'refused' when the request may go elsewhere, else ForwardFailed",
  QUICK,
  async () => {
    const gone = await listen(() => undefined);
    const server = servers.pop()!;
    await new Promise<void>((closed) => server.close(() => closed()));
    const retryable = await hop(gone, { retryable: true });
    assert.equal((await get(retryable.url)).status, 503);
    assert.deepEqual(retryable.outcomes, ['refused']);
    const plain = await hop(gone);
    assert.equal((await get(plain.url)).status, 502);
    assert.deepEqual(plain.outcomes, ['ForwardFailed']);
  },
);
