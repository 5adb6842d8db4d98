/**
 * The work a trainer's events start while it runs (activities/training-side-work.ts): a write or
 * an upload that fails mid-training fails the attempt when it settles, and is never an unhandled
 * rejection (which takes the whole GPU worker process down, every other job on it included).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { TrainingSideWork } from '../../activities/training-side-work';

describe('training side work', () => {
  test('writes run in the order queued; uploads alongside; settled waits for both', async () => {
    const work = new TrainingSideWork();
    const done: string[] = [];
    work.inOrder(async () => {
      await sleep(30);
      done.push('write 1');
    });
    work.inOrder(async () => done.push('write 2'));
    work.alongside(
      sleep(10).then(() => {
        done.push('upload');
        work.inOrder(async () => done.push('write after upload'));
      }),
    );
    await work.settled();
    assert.deepEqual(done, ['upload', 'write 1', 'write 2', 'write after upload']);
  });

  test('a failed write or upload is not an unhandled rejection; settled throws the first failure, later writes are skipped', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const work = new TrainingSideWork();
      const done: string[] = [];
      work.inOrder(async () => {
        throw new Error('database unavailable');
      });
      work.alongside(
        sleep(20).then(() => {
          throw new Error('blob store unavailable');
        }),
      );
      // The trainer keeps running (and printing) for a while before the attempt settles.
      await sleep(50);
      work.inOrder(async () => done.push('late write'));
      await sleep(50);
      await assert.rejects(work.settled(), /database unavailable/);
      assert.deepEqual(done, [], 'nothing is written after a failed write');
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
