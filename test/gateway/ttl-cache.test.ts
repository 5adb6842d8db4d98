/** The gateway's routing cache (gateway/ttl-cache.ts): never older than its TTL, the database off the request path. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ttlCache } from '../../gateway/ttl-cache';

/** A loader that counts its calls and answers `value()` after `ms`. */
function loader(value: () => number, ms = 20) {
  const calls = { n: 0 };
  const load = async () => {
    calls.n++;
    await sleep(ms);
    return value();
  };
  return { calls, load };
}

test('concurrent requests for a key never loaded share one load', async () => {
  const get = ttlCache<number>(1000);
  const l = loader(() => 7);
  const values = await Promise.all(Array.from({ length: 10 }, () => get('a', l.load)));
  assert.deepEqual(values, Array(10).fill(7));
  assert.equal(l.calls.n, 1);
});

test('past half its TTL a value is served at once while one background refresh renews it', async () => {
  const get = ttlCache<number>(2000);
  let current = 1;
  const l = loader(() => current, 300);
  assert.equal(await get('a', l.load), 1);
  await sleep(1100);
  current = 2;
  const started = performance.now();
  const served = await Promise.all(Array.from({ length: 5 }, () => get('a', l.load)));
  assert.ok(performance.now() - started < 150, 'no request waited for the 300 ms refresh');
  assert.deepEqual(served, [1, 1, 1, 1, 1]);
  assert.equal(l.calls.n, 2, 'one refresh for all of them');
  await sleep(400);
  assert.equal(await get('a', l.load), 2, 'renewed before it expired');
  assert.equal(l.calls.n, 2);
});

test('a value is never served past its TTL: a request then waits for a fresh one', async () => {
  const get = ttlCache<number>(50);
  let current = 1;
  const l = loader(() => current, 5);
  assert.equal(await get('a', l.load), 1);
  await sleep(80);
  current = 2;
  assert.equal(await get('a', l.load), 2);
});

test('a refresh that fails keeps the value until its TTL; an invalidated key is loaded again', async () => {
  const get = ttlCache<number>(2000);
  assert.equal(await get('a', async () => 1), 1);
  await sleep(1100);
  let attempts = 0;
  const failing = async () => {
    attempts++;
    throw new Error('database down');
  };
  assert.equal(await get('a', failing), 1);
  await sleep(10);
  assert.equal(await get('a', failing), 1);
  assert.equal(attempts, 2);
  get.invalidate('a');
  assert.equal(await get('a', async () => 3), 3);
});

test('a load in flight when its key is invalidated answers its caller but is not kept', async () => {
  const get = ttlCache<number>(5000);
  const early = get('a', async () => {
    await sleep(50);
    return 1;
  });
  get.invalidate('a');
  assert.equal(await get('a', async () => 2), 2);
  assert.equal(await early, 1);
  assert.equal(await get('a', async () => 9), 2, 'the later load is what is kept');
});
