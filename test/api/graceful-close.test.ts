/**
 * Shutting down the API (or the gateway) while a client keeps its keep-alive connection busy, as a
 * queue worker does with claim after claim: the request in flight is answered, the connection
 * ends after it, and the server closes without waiting out the grace period.
 */
import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import express from 'express';
import { CLOSE_GRACE_MS, listen } from '../../api/listen';

test('closing while a client reuses its connection: answered, then closed, well within the grace', async () => {
  const app = express();
  // The close comes while a request is in flight (the third), as it would to a busy worker: closing
  // between two requests instead races the client's next one, which is the keep-alive race every
  // HTTP/1.1 server has, not what this test is about.
  let arrived = 0;
  let thirdArrived!: () => void;
  const third = new Promise<void>((resolve) => (thirdArrived = resolve));
  app.get('/claim', (_req, res) => {
    if (++arrived === 3) thirdArrived();
    setTimeout(() => res.json({ ok: true }), 50);
  });
  const { server, close } = await listen(app, 0, '127.0.0.1');
  const port = (server.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const answers: Array<{ status: number; connection: string | undefined }> = [];
  let stopped = false;
  // The worker: one connection, the next request as soon as the last is answered.
  const worker = (async () => {
    while (!stopped) {
      const answer = await new Promise<{ status: number; connection: string | undefined } | null>((resolve) => {
        const req = request({ port, path: '/claim', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
        });
        req.on('error', () => resolve(null)); // refused: the server is gone
        req.end();
      });
      if (!answer) break;
      answers.push(answer);
    }
  })();
  await Promise.race([third, worker]); // the worker ends early only if the server went away
  const started = Date.now();
  await close();
  const took = Date.now() - started;
  stopped = true;
  await worker;
  agent.destroy();
  assert.ok(took < CLOSE_GRACE_MS / 5, `closed after ${took} ms, not held open by the busy connection`);
  assert.ok(answers.length >= 2, 'requests were served before the close');
  assert.ok(
    answers.every((a) => a.status === 200),
    'every request the server took was answered',
  );
  assert.equal(answers.at(-1)!.connection, 'close', 'the last answer told the client the connection ends');
});
