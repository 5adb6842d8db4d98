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
import { startResourceWorkflow, startResourceWorkflowOrUndo } from '../../api/workflows';
import { storageVolume } from '../../workflows/storage-volumes';
import { startTestPlatform, type TestPlatform } from '../helpers/platform';

let p: TestPlatform;
before(async () => {
  // Nobody runs these runs: no control worker.
  p = await startTestPlatform({ controlWorker: false, gpuTypes: [] });
});
after(() => p.stop());

describe('starting a workflow whose answer is lost', () => {
  test('a start reports success exactly when the run exists', async () => {
    const outcomes = { started: 0, refused: 0 };
    const mismatches: string[] = [];
    for (let i = 0; i < 60; i++) {
      const workflowId = `start-race/${process.pid}-${i}`;
      let said: 'started' | 'failed';
      try {
        await startResourceWorkflow(
          p.temporal,
          {
            workflow: storageVolume,
            workflowId,
            args: [] as never,
            projectId: 'proj-start-race',
            resourceType: 'test',
            resourceId: workflowId,
            status: 'Pending',
            summary: 'start race',
            details: 'started by test/api/workflow-start.test.ts',
          },
          1 + (i % 12), // 1 to 12 ms: some calls are cut before the server answers, some after it acted
        );
        said = 'started';
      } catch {
        said = 'failed';
      }
      const exists = await p.temporal.workflow
        .getHandle(workflowId)
        .describe()
        .then(
          () => true,
          (err) => {
            if (err instanceof WorkflowNotFoundError) return false;
            throw err;
          },
        );
      if (exists) {
        outcomes.started++;
        await p.temporal.workflow.getHandle(workflowId).terminate('test cleanup');
      } else outcomes.refused++;
      if ((said === 'started') !== exists) mismatches.push(`${workflowId}: said ${said}, exists ${exists}`);
    }
    assert.deepEqual(mismatches, [], JSON.stringify(outcomes));
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
