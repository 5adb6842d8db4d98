/** The gateway's order for batch and evaluation calls: a concurrency per project, interactive calls first. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkTraffic } from '../../gateway/work-traffic';

test("a project's work calls beyond its concurrency wait their turn; other projects' do not", async () => {
  const traffic = new WorkTraffic({ perProject: 2, yieldMs: 60_000 });
  const started: string[] = [];
  const go = (project: string, name: string) =>
    traffic.workCall(project, 'replicas').then((done) => {
      started.push(name);
      return done;
    });
  const a1 = await go('a', 'a1');
  const a2 = await go('a', 'a2');
  const a3 = go('a', 'a3');
  const b1 = await go('b', 'b1');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(started, ['a1', 'a2', 'b1'], 'a3 waits for a slot of project a');
  a1();
  (await a3)();
  a2();
  b1();
  assert.deepEqual(started, ['a1', 'a2', 'b1', 'a3']);
});

test('a work call waits while the replicas serve interactive calls, and goes when they are done', async () => {
  const traffic = new WorkTraffic({ perProject: 4, yieldMs: 60_000 });
  const interactive = traffic.interactiveCall('replicas');
  let went = false;
  const work = traffic.workCall('a', 'replicas').then((done) => {
    went = true;
    return done;
  });
  const elsewhere = await traffic.workCall('a', 'other-replicas'); // nothing interactive there
  await new Promise((r) => setImmediate(r));
  assert.equal(went, false, 'held while an interactive call is in flight');
  interactive();
  (await work)();
  assert.equal(went, true);
  elsewhere();
});

test('a work call goes after yieldMs even while interactive calls keep coming', async () => {
  const traffic = new WorkTraffic({ perProject: 1, yieldMs: 20 });
  const interactive = traffic.interactiveCall('replicas');
  (await traffic.workCall('a', 'replicas'))();
  interactive();
});
