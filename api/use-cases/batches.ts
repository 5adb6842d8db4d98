/**
 * Batches: creating one (its input file checked, its row, its workflow `batch/<id>`) and
 * cancelling one (an Update of that workflow). The lines themselves are checked by the workflow's
 * first activity, which fails the batch naming the line.
 */
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { deleteBatchRow, getBatch, insertBatch, type BatchRow } from '../../db/batches';
import { getFile } from '../../db/files';
import { newId } from '../../platform/ids';
import {
  BATCH_ENDED,
  BATCH_RESOURCE_TYPE,
  batchWorkflowId,
  completionWindowSeconds,
  DEFAULT_COMPLETION_WINDOW,
} from '../../shared/batches';
import { batch as batchWorkflow, cancelBatchUpdate } from '../../workflows/batches';
import type { ApiDeps } from '../deps';
import { badRequest, notFound } from '../errors';
import type { CreateBatchBody } from '../schemas/batches';
import { executeEntityUpdate, startResourceWorkflowOrUndo } from '../workflows';

/** Creates a batch (VALIDATING) and starts its workflow; its row. */
export async function createBatch(
  deps: Pick<ApiDeps, 'db' | 'temporal' | 'config'>,
  principal: Principal,
  body: z.infer<typeof CreateBatchBody>,
): Promise<BatchRow> {
  const { db, temporal, config } = deps;
  const file = await getFile(db, principal.projectId, body.input_file_id);
  if (!file) throw badRequest(`No file '${body.input_file_id}' in this project.`, 'input_file_id', 'file_not_found');
  if (file.purpose !== 'batch-api')
    throw badRequest(
      `File '${file.id}' has purpose '${file.purpose}'; a batch's input is a file of purpose 'batch-api'.`,
      'input_file_id',
    );
  if (!file.uploaded_at) throw badRequest(`File '${file.id}' has not finished uploading.`, 'input_file_id');
  if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
  const window = body.completion_window ?? DEFAULT_COMPLETION_WINDOW;
  const deadline = new Date(Date.now() + completionWindowSeconds(window)! * 1000);
  const id = newId('batch');
  await insertBatch(db, {
    id,
    projectId: principal.projectId,
    apiKeyId: principal.apiKeyId,
    userId: principal.userId,
    endpoint: body.endpoint,
    inputFileId: file.id,
    modelId: body.model_id,
    completionWindow: window,
    priority: body.priority,
    fileSizeBytes: file.bytes === null ? null : Number(file.bytes),
    deadline,
  });
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: batchWorkflow,
      workflowId: batchWorkflowId(id),
      args: [
        {
          batchId: id,
          projectId: principal.projectId,
          apiKeyId: principal.apiKeyId,
          endpoint: body.endpoint,
          inputFileId: file.id,
          ...(body.model_id ? { modelId: body.model_id } : {}),
          deadline: deadline.toISOString(),
          retentionSeconds: Math.round(config.batchRetentionDays * 86400),
          sliceLines: config.batchSliceLines,
          slicesPerRun: config.batchSlicesPerRun,
        },
      ],
      projectId: principal.projectId,
      resourceType: BATCH_RESOURCE_TYPE,
      resourceId: id,
      status: 'VALIDATING',
      summary: `Batch of ${file.filename} to ${body.endpoint}`,
      details: `Created by API key \`${principal.apiKeyId}\`; completion window ${window}.`,
    },
    () => deleteBatchRow(db, id),
  );
  return (await getBatch(db, principal.projectId, id))!;
}

/** Cancels a batch still running (it ends CANCELLED with the lines answered so far); an ended one is as it was. */
export async function cancelBatch(
  deps: Pick<ApiDeps, 'db' | 'temporal'>,
  principal: Principal,
  id: string,
): Promise<BatchRow> {
  const { db, temporal } = deps;
  const row = await getBatch(db, principal.projectId, id);
  if (!row) throw notFound(`No batch '${id}' in this project.`);
  if (BATCH_ENDED.includes(row.status)) return row;
  await executeEntityUpdate(temporal, batchWorkflowId(id), cancelBatchUpdate, []);
  return (await getBatch(db, principal.projectId, id))!;
}
