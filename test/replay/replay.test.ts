/**
 * Determinism guard: every recorded history in test/replay/histories replays
 * against the current workflow code, and every workflow type has one.
 * Record new ones with `npm run record-history -- <workflowId> <label>` (a run
 * on a server), or with GANTRY_RECORD_HISTORIES=1 from the workflow test tier
 * (test/workflows/, see recordHistoryIfAsked). Both add the file to
 * SHA256SUMS; test/replay/patches.test.ts checks the patches and the files.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { DefaultLogger, Runtime, Worker, type ReplayResult } from '@temporalio/worker';
import * as workflows from '../../workflows';
import { workflowSource } from '../../workers/workflow-code';
import { withoutWorkflowPromiseHook } from '../helpers/workflow-promise-hook';

Runtime.install({ logger: new DefaultLogger('WARN') });

const DIR = path.join(__dirname, 'histories');
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort();

function workflowTypeOf(history: ReturnType<typeof historyFromJSON>): string {
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const name = started?.workflowType?.name;
  if (!name) throw new Error('history does not begin with WorkflowExecutionStarted');
  return name;
}

describe('replay of recorded histories', () => {
  test('there are histories to replay', () => {
    assert.ok(files.length > 0, `no histories in ${DIR}`);
  });

  test('every workflow type has at least one recorded history', () => {
    const recorded = new Set(
      files.map((f) => workflowTypeOf(historyFromJSON(JSON.parse(readFileSync(path.join(DIR, f), 'utf8'))))),
    );
    const workflowTypes = Object.entries(workflows)
      .filter(([, v]) => typeof v === 'function')
      .map(([name]) => name);
    const missing = workflowTypes.filter((name) => !recorded.has(name));
    assert.deepEqual(missing, [], `workflow types without a recorded history: ${missing.join(', ')}`);
  });

  // One replay worker for every history (a worker per history spent most of the file's CPU
  // loading the workflow bundle); each history still passes or fails as its own test.
  const historyOf = (file: string) => historyFromJSON(JSON.parse(readFileSync(path.join(DIR, file), 'utf8')));
  const replayed = new Map<string, ReplayResult>();
  before(async () => {
    withoutWorkflowPromiseHook();
    try {
      const histories = files.map((file) => ({ workflowId: file, history: historyOf(file) }));
      for await (const result of Worker.runReplayHistories(workflowSource(), histories)) {
        replayed.set(result.workflowId, result);
      }
    } catch {
      // A history that stops the shared worker (a malformed one) ends the batch: the histories it
      // did not reach replay alone below, so each test still says whose history failed.
    }
  });

  for (const file of files) {
    test(`replays ${file}`, async () => {
      const result = replayed.get(file);
      // Throws a DeterminismViolationError when the code no longer produces the recorded commands.
      if (!result) return Worker.runReplayHistory(workflowSource(), historyOf(file), file);
      if (result.error) throw result.error;
    });
  }
});
