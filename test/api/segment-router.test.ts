/**
 * The API's routes are grouped by their path's first segment (api/segment-router.ts): a request
 * reaches the route Express alone would have given it, in a real app on loopback.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, test } from 'node:test';
import express from 'express';
import { listen } from '../../api/listen';
import { SegmentRouter } from '../../api/segment-router';

let base: string;
let close: () => Promise<void>;

before(async () => {
  const routes = new SegmentRouter();
  const answer = (name: string) => (req: express.Request, res: express.Response) =>
    void res.json({ name, params: req.params });
  routes.add('get', '/files/multipart/uploads', answer('multipart uploads'));
  routes.add('get', '/files/:id', answer('file'));
  routes.add('post', '/files/:id', answer('file update'));
  routes.add('get', '/queue/status', answer('queue status'));
  routes.add('get', '/queue', answer('queue root'));
  const app = express();
  app.use('/v1', routes.handle);
  app.use((_req, res) => void res.status(404).json({ name: 'fell through' }));
  const server = await listen(app, 0, '127.0.0.1');
  base = `http://127.0.0.1:${(server.server.address() as AddressInfo).port}`;
  close = server.close;
});
after(() => close());

const get = async (path: string, method = 'GET') => {
  const res = await fetch(`${base}${path}`, { method });
  return { status: res.status, body: (await res.json()) as { name: string; params?: Record<string, string> } };
};

test('within a segment, routes keep the order they were added in', async () => {
  assert.deepEqual((await get('/v1/files/multipart/uploads')).body.name, 'multipart uploads');
  assert.deepEqual((await get('/v1/files/file-1')).body, { name: 'file', params: { id: 'file-1' } });
  assert.deepEqual((await get('/v1/files/file-1', 'POST')).body.name, 'file update');
});

test('paths match as Express matches them: without regard to case, with or without a trailing slash', async () => {
  assert.equal((await get('/v1/QUEUE/Status')).body.name, 'queue status');
  assert.equal((await get('/v1/queue/status/')).body.name, 'queue status');
  assert.equal((await get('/v1/queue')).body.name, 'queue root');
  assert.equal((await get('/v1/queue?x=1')).body.name, 'queue root');
});

test('a path no route takes goes on to what follows the router', async () => {
  assert.deepEqual(await get('/v1/clusters/c-1'), { status: 404, body: { name: 'fell through' } });
  assert.deepEqual(await get('/v1/files'), { status: 404, body: { name: 'fell through' } });
  assert.deepEqual(await get('/v1/'), { status: 404, body: { name: 'fell through' } });
  assert.deepEqual(await get('/v1/queue/status', 'DELETE'), { status: 404, body: { name: 'fell through' } });
});

test('a route whose first segment is not plain text is refused when it is added', () => {
  const routes = new SegmentRouter();
  assert.throws(() => routes.add('get', '/:projectId/files', () => undefined), /first segment/);
  assert.throws(() => routes.add('get', '/*rest', () => undefined), /first segment/);
  assert.throws(() => routes.add('get', '/{v1}/files', () => undefined), /first segment/);
});
