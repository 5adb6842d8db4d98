/**
 * Starting a resource's workflow when the answer to the start call is lost:
 * a deadline of a few milliseconds cuts calls short, some after the server
 * took them. startResourceWorkflow must then say "started" exactly when a run
 * exists, because its callers delete the resource's row when it throws (a row
 * gone under a running workflow is an orphan nobody can see or delete).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import { resourceRunOptions, startResourceWorkflow, startResourceWorkflowOrUndo } from '../../api/workflows';
import { storageVolume } from '../../workflows/storage-volumes';
import { startTestPlatform, type TestPlatform } from '../helpers/platform';

let p: TestPlatform;
before(async () => {
  // Nobody runs these runs: no control worker.
  p = await startTestPlatform({ controlWorker: false, gpuTypes: [] });
});
after(() => p.stop());

describe('starting a workflow whose answer is lost', () => {
  const exists = (workflowId: string) =>
    p.temporal.workflow
      .getHandle(workflowId)
      .describe()
      .then(
        () => true,
        (err) => {
          if (err instanceof WorkflowNotFoundError) return false;
          throw err;
        },
      );
  const startOf = (workflowId: string) => ({
    workflow: storageVolume,
    workflowId,
    args: [] as never,
    projectId: 'proj-start-race',
    resourceType: 'test',
    resourceId: workflowId,
    status: 'Pending',
    summary: 'start race',
    details: 'started by test/api/workflow-start.test.ts',
  });

  test('a start reports success exactly when the run exists', async (t) => {
    // Each round starts two runs under the same short deadline: one with the bare client call,
    // whose error after the server took the start is the race (`raced`: it threw, the run exists),
    // and one with startResourceWorkflow, which must say "started" exactly when its run exists.
    const outcomes = { started: 0, refused: 0, raced: 0 };
    const mismatches: string[] = [];
    // Until the race has happened a few times, within a bound: a run that never saw it fails below.
    for (let i = 0; i < 400 && (outcomes.raced < 3 || outcomes.refused < 3 || i < 60); i++) {
      const deadlineMs = 1 + (i % 12); // 1 to 12 ms: some calls are cut before the server answers, some after it acted
      const bare = `start-race/${process.pid}-${i}-bare`;
      const bareThrew = await p.temporal.connection
        .withDeadline(Date.now() + deadlineMs, () =>
          p.temporal.workflow.start(storageVolume, { ...resourceRunOptions(startOf(bare)) }),
        )
        .then(
          () => false,
          () => true,
        );
      if (bareThrew && (await exists(bare))) outcomes.raced++;

      const workflowId = `start-race/${process.pid}-${i}`;
      let said: 'started' | 'failed';
      try {
        await startResourceWorkflow(p.temporal, startOf(workflowId), deadlineMs);
        said = 'started';
      } catch {
        said = 'failed';
      }
      const there = await exists(workflowId);
      if (there) outcomes.started++;
      else outcomes.refused++;
      if ((said === 'started') !== there) mismatches.push(`${workflowId}: said ${said}, exists ${there}`);
      for (const id of [bare, workflowId])
        await p.temporal.workflow
          .getHandle(id)
          .terminate('test cleanup')
          .catch(() => undefined);
    }
    t.diagnostic(`outcomes: ${JSON.stringify(outcomes)}`);
    assert.deepEqual(mismatches, [], JSON.stringify(outcomes));
    assert.ok(outcomes.raced > 0, `no answer was lost after the server acted: ${JSON.stringify(outcomes)}`);
    assert.ok(outcomes.refused > 0, `no call was cut before the server acted: ${JSON.stringify(outcomes)}`);
  });
});

describe('the one compensation policy of a create', () => {
  const start = (workflowId: string) => ({
    workflow: storageVolume,
    workflowId,
    args: [] as never,
    projectId: 'proj-undo',
    resourceType: 'test',
    resourceId: workflowId,
    status: 'Pending',
    summary: 'undo policy',
    details: 'started by test/api/workflow-start.test.ts',
  });

  test('a started run is not undone; a run that did not start is, and the caller gets the start error', async () => {
    const workflowId = `undo-policy/${process.pid}`;
    const undone: string[] = [];
    const note = (what: string) => async () => void undone.push(what);
    await startResourceWorkflowOrUndo(p.temporal, start(workflowId), note('first'));
    assert.deepEqual(undone, [], 'nothing undone when the run started');
    // The same id again: the server refuses the start, so what the create wrote is removed.
    await assert.rejects(
      startResourceWorkflowOrUndo(p.temporal, start(workflowId), note('second')),
      WorkflowExecutionAlreadyStartedError,
    );
    assert.deepEqual(undone, ['second']);
    // An undo that fails as well still reports why the start failed, with the undo's failure beside it.
    const err = await startResourceWorkflowOrUndo(p.temporal, start(workflowId), async () => {
      throw new Error('database unavailable');
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowExecutionAlreadyStartedError, String(err));
    assert.match(String((err as { undoError?: Error }).undoError), /database unavailable/);
    await p.temporal.workflow.getHandle(workflowId).terminate('test cleanup');
  });
});
