/**
 * The error handler on its own: causes no route produces yet (an unexpected
 * exception, rate limiting, a database outage) still leave in the spec's shape.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import express from 'express';
import pg from 'pg';
import { tooManyRequests } from '../../api/errors';
import { errorHandler, routeNotFound } from '../../api/middleware/errors';
import { requestLogging } from '../../api/middleware/request-context';
import { createLogger } from '../../platform/logger';
import { call, eventually, LogCapture } from '../helpers/platform';

describe('error mapping', () => {
  const logs = new LogCapture();
  let base = '';
  let close: () => void;
  let hangReached: () => void = () => undefined;

  before(async () => {
    const app = express();
    app.use(requestLogging(createLogger('api', 'info', logs)));
    app.get('/boom', () => {
      throw new Error('db password is hunter2');
    });
    app.get('/slow-down', () => {
      throw tooManyRequests('Too many requests for this key. Retry after 7 seconds.', 7);
    });
    app.get('/db-down', () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    });
    // The database's host name does not resolve (a compose service whose DNS entry is gone):
    // what the real pg pool throws. `.invalid` never resolves (RFC 2606).
    app.get('/db-unresolvable', async (_req, _res, next) => {
      const pool = new pg.Pool({ host: 'postgres.invalid', connectionTimeoutMillis: 5000 });
      await pool.query('SELECT 1').catch(next);
      await pool.end();
    });
    app.get('/taken', () => {
      // What pg throws when a write loses a race for a unique name.
      throw Object.assign(new Error('duplicate key value violates unique constraint "x_name_key"'), { code: '23505' });
    });
    // Never answers: the client gives up first.
    app.get('/hang', () => hangReached());
    app.use(routeNotFound);
    app.use(errorHandler);
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    close = () => server.close();
  });
  after(() => close());

  test('an unexpected exception is a 500 that names the request id and hides the cause', async () => {
    const res = await call(base, 'GET', '/boom', { headers: { 'x-request-id': 'req-500' } });
    assert.equal(res.status, 500);
    assert.deepEqual(res.body, {
      error: {
        message: 'Internal server error. Quote request id req-500 when reporting it.',
        type: 'api_error',
        param: null,
        code: 'internal_error',
      },
    });
    // The cause is in the server log for operators, with the request id.
    const line = logs.lines.map((l) => JSON.parse(l)).find((l) => l.req?.id === 'req-500' && l.err);
    assert.ok(line, 'the failure is logged with its request id');
    assert.match(JSON.stringify(line.err), /hunter2/);
  });

  test('a client that leaves before its answer gets one closing line, request aborted', async () => {
    const gone = new AbortController();
    const reached = new Promise<void>((r) => (hangReached = r));
    const leaving = fetch(`${base}/hang`, { headers: { 'x-request-id': 'req-gone' }, signal: gone.signal });
    await reached;
    gone.abort();
    await assert.rejects(leaving);
    const lines = await eventually(
      async () => logs.lines.map((l) => JSON.parse(l)).filter((l) => l.req?.id === 'req-gone'),
      (found) => found.length > 0,
      5_000,
      20,
    );
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0].msg, 'request aborted');
  });

  test('429 carries Retry-After', async () => {
    const res = await call(base, 'GET', '/slow-down');
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '7');
    assert.equal(res.body.error.type, 'rate_limit_error');
  });

  test('a database that cannot be reached is a 503 with Retry-After', async () => {
    const res = await call(base, 'GET', '/db-down');
    assert.equal(res.status, 503);
    assert.ok(res.headers.get('retry-after'));
    assert.match(res.body.error.message, /database is unavailable/);
  });

  test('a database whose host name does not resolve is a 503 too', async () => {
    const res = await call(base, 'GET', '/db-unresolvable');
    assert.equal(res.status, 503, JSON.stringify(res.body));
    assert.ok(res.headers.get('retry-after'));
  });

  test('a unique constraint lost to a concurrent write is a 409, not a 500', async () => {
    const res = await call(base, 'GET', '/taken');
    assert.equal(res.status, 409);
    assert.equal(res.body.error.code, 'conflict');
    assert.doesNotMatch(res.body.error.message, /x_name_key/, 'no constraint names in answers');
  });
});
