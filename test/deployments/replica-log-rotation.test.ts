/**
 * A replica's log rotated under a writer that never pauses (another process, appending as a
 * replica does) while a follower reads it as the logs route does: the follower never gets a line
 * twice or out of order, across many rotations, and ends with the last line written. Lines written
 * while a rotation copies the file may be lost (copytruncate's window, replica-log.ts).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';

import { linesSince, tailLines, type LogPosition } from '../../providers/containers/log-tail';
import { rotateReplicaLog } from '../../providers/containers/replica-log';

test('a follower reads across rotations under a writer that never stops: no line twice, none out of order', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-log-rotation-'));
  const file = path.join(dir, 'replica.log');
  try {
    const lines = 20_000;
    // The writer: numbered lines, each its own append, through a descriptor it holds (O_APPEND).
    const writer = spawn(process.execPath, [
      '-e',
      `const fs = require('fs'); const fd = fs.openSync(${JSON.stringify(file)}, 'a');
       let i = 0; const pad = 'x'.repeat(60);
       (function write() { for (const end = i + 20; i < end && i < ${lines}; i++) fs.writeSync(fd, i + ' ' + pad + '\\n');
         if (i < ${lines}) setTimeout(write, 1); })();`,
    ]);
    const exited = new Promise((r) => writer.once('exit', r));
    let running = true;
    void exited.then(() => (running = false));

    let rotations = 0;
    const rotator = (async () => {
      while (running) {
        if (await rotateReplicaLog(dir, file, 8192)) rotations++;
        await new Promise((r) => setTimeout(r, 15));
      }
    })();
    const seen: number[] = [];
    let position: LogPosition | undefined;
    const read = async () => {
      const next = position ? await linesSince(file, position) : await tailLines(file, 1000);
      for (const l of next.lines) seen.push(Number(l.split(' ')[0]));
      position = next.position;
    };
    while (running) {
      await read();
      await new Promise((r) => setTimeout(r, 5));
    }
    await rotator;
    // A last line once rotations have stopped (the writer's own last lines may fall in a copy's window).
    appendFileSync(file, `${lines} end\n`);
    for (let i = 0; i < 3; i++) await read();

    assert.ok(rotations >= 5, `${rotations} rotations`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1], `line ${seen[i]} after ${seen[i - 1]}`);
    assert.equal(seen.at(-1), lines, 'the last line arrived');
    assert.ok(seen.length > lines / 2, `${seen.length} of ${lines} lines arrived`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
