/**
 * The trainer line protocol parser (providers/trainer/protocol.ts) on lines a trainer could print,
 * and what the process runner does with a line that breaks it: the trainer is stopped and the run
 * ends with an error event naming the line (the fine-tune then fails with that message).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { parseTrainerLine, TrainerProtocolError } from '../../providers/trainer/protocol';
import { runTrainer } from '../../providers/trainer/process-trainer';

describe('trainer line protocol', () => {
  const work = mkdtempSync(path.join(tmpdir(), 'gantry-protocol-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  test('a step with a diverged loss (written as null) is read as null; blank lines and unknown events are skipped', () => {
    const e = parseTrainerLine(
      '{"event": "step", "step": 3, "epoch": 0.5, "loss": null, "lr": 0.001, "grad_norm": null, "tokens": 512}',
    );
    assert.deepEqual(e, { event: 'step', step: 3, epoch: 0.5, loss: null, lr: 0.001, grad_norm: null, tokens: 512 });
    assert.equal(parseTrainerLine('   '), null);
    // A newer trainer's event this side does not know yet.
    assert.equal(parseTrainerLine('{"event": "warmup", "step": 1}'), null);
  });

  test('a line that is not JSON, an unknown event or a missing field is a protocol error naming the line', () => {
    assert.throws(() => parseTrainerLine('loading weights...'), TrainerProtocolError);
    assert.throws(() => parseTrainerLine('{"step": 1}'), /breaks the protocol \(event: /);
    assert.throws(
      () => parseTrainerLine('{"event": "checkpoint", "step": 10, "epoch": 1, "path": "/tmp/x"}'),
      /breaks the protocol \(file: .*"checkpoint"/,
    );
  });

  test('a trainer that prints a stray line to stdout is stopped, and its run ends with an error event saying why', async () => {
    // A stand-in for the interpreter: one good event, one stray print, then it would train for a minute.
    const python = path.join(work, 'stray-trainer.sh');
    const start = JSON.stringify({
      event: 'start',
      total_steps: 10,
      steps_per_epoch: 10,
      n_epochs: 1,
      trainable_params: 8,
      resumed_from_step: null,
    });
    writeFileSync(python, `#!/bin/sh\necho '${start}'\necho 'debug: batch shapes (8, 64)'\nexec sleep 60\n`, {
      mode: 0o755,
    });
    const started = Date.now();
    const run = await runTrainer({ python, config: { output_dir: path.join(work, 'out') } });
    assert.ok(Date.now() - started < 30_000, 'stopped, not left to run');
    assert.deepEqual(
      run.events.map((e) => e.event),
      ['start', 'error'],
    );
    const error = run.events[1];
    assert.ok(error.event === 'error' && /not JSON: debug: batch shapes/.test(error.message), JSON.stringify(error));
  });
});
