/**
 * The batch workflow's decisions in Temporal's time-skipping test server, with activities that
 * answer at once: a batch of 100,000 lines (the size issue 43 names) runs every slice once, in
 * order, and each run of its workflow keeps a small history, continuing as new every
 * `slicesPerRun` slices; then it ends COMPLETED and removes its files after the retention.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { BatchActivities } from '../../activities/batches';
import { batchWorkflowId, type BatchSlice, type BatchWorkflowInput } from '../../shared/batches';
import { CONTROL_TASK_QUEUE } from '../../shared/task-queues';
import type { batch as batchWorkflow } from '../../workflows/batches';
import { workflowTestEnvForFile, historyLengths, runWorkers } from '../helpers/workflow-env';

const LINES = 100_000;
const SLICE_LINES = 500;
const SLICES_PER_RUN = 40;
/** Bytes a line takes in the input file (the slices' byte ranges only have to be consistent). */
const LINE_BYTES = 120;

const t = workflowTestEnvForFile();

describe('batch workflow decisions (time-skipping)', () => {
  test(
    '100,000 lines: every slice once, in order; each run of the workflow stays small',
    { timeout: 120_000 },
    async (ctx) => {
      const ran: number[] = [];
      const ended: string[] = [];
      let removed = 0;
      const activities: Pick<
        BatchActivities,
        'validateBatchInput' | 'runBatchSlice' | 'finishBatch' | 'removeBatchFiles'
      > = {
        async validateBatchInput({ sliceLines }) {
          const slices: BatchSlice[] = [];
          for (let first = 0; first < LINES; first += sliceLines) {
            const lines = Math.min(sliceLines, LINES - first);
            slices.push({ firstLine: first, lines, start: first * LINE_BYTES, end: (first + lines) * LINE_BYTES - 1 });
          }
          return { ok: true, slices, totalLines: LINES };
        },
        async runBatchSlice({ slice }) {
          ran.push(slice.firstLine);
          return { answered: slice.lines };
        },
        async finishBatch({ status }) {
          ended.push(status);
        },
        async removeBatchFiles() {
          removed++;
        },
      };
      const input: BatchWorkflowInput = {
        batchId: 'batch-100k',
        projectId: 'proj-ts',
        apiKeyId: 'key-ts',
        endpoint: '/v1/chat/completions',
        inputFileId: 'file-ts',
        deadline: new Date(Date.now() + 86_400_000).toISOString(),
        retentionSeconds: 7 * 86_400,
        sliceLines: SLICE_LINES,
        slicesPerRun: SLICES_PER_RUN,
      };
      await runWorkers([await t.worker(CONTROL_TASK_QUEUE, activities)], async () => {
        const handle = await t.env.client.workflow.start<typeof batchWorkflow>('batch', {
          taskQueue: CONTROL_TASK_QUEUE,
          workflowId: batchWorkflowId(input.batchId),
          args: [input],
        });
        t.watch(handle);
        await t.advance(8 * 86_400_000, 3_600_000);
        await t.finished(handle);
        const runs = await historyLengths(t.env, handle);
        ctx.diagnostic(`${runs.length} runs of ${runs.join(', ')} events`);
        const slices = LINES / SLICE_LINES;
        assert.deepEqual(
          ran,
          Array.from({ length: slices }, (_, i) => i * SLICE_LINES),
          'every slice once, in order',
        );
        assert.equal(runs.length, Math.ceil(slices / SLICES_PER_RUN), 'a run per 40 slices');
        // A slice is some 7 events (scheduled, started, completed, the status projection's
        // search attributes, a workflow task); 40 of them, the validation and the end.
        assert.ok(Math.max(...runs) < 450, `largest run ${Math.max(...runs)} events`);
        assert.deepEqual(ended, ['COMPLETED']);
        assert.equal(removed, 1, 'the files removed once, after the retention');
      });
    },
  );
});
