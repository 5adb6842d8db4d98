/**
 * A GPU host's training slots: trainings beyond them wait their turn on the
 * host, heartbeating, and a cancelled one leaves the wait at once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { TrainingSlots } from '../../providers/accelerator/training-slots';

describe('training slots of a GPU host', () => {
  test('a training beyond the slots waits, heartbeating, and starts when one ends', async () => {
    const slots = new TrainingSlots(1);
    const first = await slots.take(new AbortController().signal, () => assert.fail('the first does not wait'));
    let beats = 0;
    let started = false;
    const second = slots
      .take(new AbortController().signal, () => beats++)
      .then((release) => {
        started = true;
        return release;
      });
    // Two heartbeats while waiting: it had its chance to start, and did not.
    while (beats < 2 && !started) await new Promise((r) => setTimeout(r, 20));
    assert.equal(started, false, 'no second trainer while the slot is held');
    assert.ok(beats >= 2, `heartbeats while waiting: ${beats}`);
    first();
    first(); // a second release of the same slot frees nothing more
    const release = await second;
    assert.equal(started, true);
    let third = false;
    let thirdBeats = 0;
    void slots.take(new AbortController().signal, () => thirdBeats++).then(() => (third = true));
    // Two heartbeats of its wait: it had its chance to start, and did not.
    while (thirdBeats < 2 && !third) await new Promise((r) => setTimeout(r, 20));
    assert.equal(third, false, 'the double release did not make room for a third');
    release();
  });

  test('a cancelled waiter leaves the queue at once and the slot goes to the next one', async () => {
    const slots = new TrainingSlots(1);
    const held = await slots.take(new AbortController().signal, () => undefined);
    const cancel = new AbortController();
    const cancelled = slots.take(cancel.signal, () => undefined);
    let nextStarted = false;
    const next = slots
      .take(new AbortController().signal, () => undefined)
      .then((r) => {
        nextStarted = true;
        return r;
      });
    cancel.abort(new Error('the job was cancelled'));
    await assert.rejects(cancelled, /the job was cancelled/);
    held();
    (await next)();
    assert.equal(nextStarted, true);
  });
});
