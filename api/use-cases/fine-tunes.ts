/**
 * Creating a fine-tuning job: the model and files it names are checked, its plan resolved and its
 * price quoted against the organization's credit; then its row, first event and file leases in one
 * transaction, then its workflow `fine-tune/<id>`. If the workflow cannot start, the row goes again
 * with its leases (docs/decisions/0001). Cancelling one: its status and event in one transaction,
 * then its workflow is asked to stop (training stops after its current step). Deleting one: its
 * row, events, checkpoints and leases, then every blob it stored.
 */
import { WorkflowNotFoundError } from '@temporalio/client';
import Decimal from 'decimal.js';
import type { Principal } from '../../db/accounts';
import { acquireFileLease, getFile } from '../../db/files';
import {
  addFineTuneEvent,
  deleteFineTuneRow,
  getFineTuneById,
  insertFineTune,
  listCheckpoints,
  requestFineTuneCancel,
  type FineTuneRow,
} from '../../db/fine-tunes';
import { withTransaction } from '../../db/pool';
import { newId } from '../../platform/ids';
import { deleteScheduledBlobs } from '../../providers/storage/blob-deletions';
import {
  checkpointDownloadVariant,
  FINAL_DOWNLOAD_VARIANTS,
  FINE_TUNE_RESOURCE_TYPE,
  FINISHED_FINE_TUNE_STATUSES,
  fineTuneDownloadKey,
  fineTuneWorkflowId,
  tokenizedDatasetArchiveKey,
  type FineTuneWorkflowInput,
} from '../../shared/fine-tunes';
import { fineTune } from '../../workflows/fine-tunes';
import type { ApiDeps } from '../deps';
import { conflict, paymentRequired } from '../errors';
import type { CreateFineTuneInput } from '../schemas/fine-tunes';
import { startResourceWorkflowOrUndo } from '../workflows';
import { resolveCheckpointSource } from './fine-tunes-checkpoint-source';
import { checkFile, quoteFineTune, resolveModel, resolvePlan } from './fine-tunes-plan';

export async function createFineTune(
  deps: ApiDeps,
  principal: Principal,
  body: CreateFineTuneInput,
): Promise<FineTuneRow> {
  const { db, temporal, config } = deps;
  const source =
    body.from_checkpoint !== undefined && body.model === undefined
      ? await resolveCheckpointSource(db, principal.projectId, body.from_checkpoint)
      : undefined;
  const model = resolveModel(body, source);
  const training = checkFile(
    await getFile(db, principal.projectId, body.training_file),
    body.training_file,
    'training_file',
  );
  const validation = body.validation_file
    ? checkFile(await getFile(db, principal.projectId, body.validation_file), body.validation_file, 'validation_file')
    : null;
  const plan = resolvePlan(body, model, training, validation, source);
  // Credit is checked here on the quote, and again on the exact price when training starts.
  const { price, credit } = await quoteFineTune(
    deps,
    principal.projectId,
    { train: training, eval: validation },
    plan,
    model,
  );
  if (price.total.gt(credit)) {
    throw paymentRequired(
      `The job is estimated at ${price.total.toFixed()} USD and the organization has ${Decimal.max(credit, 0).toFixed()} USD of credit left.`,
    );
  }
  const id = newId('ft');
  const baseName = model.name.split('/').pop();
  const modelOutputName = `${principal.projectSlug}/${baseName}${plan.suffix ? `-${plan.suffix}` : ''}-${id.slice(3, 11)}`;
  const row = await withTransaction(db, async (tx) => {
    const job = await insertFineTune(tx, {
      id,
      projectId: principal.projectId,
      createdBy: principal.userId ?? principal.apiKeyId,
      plan,
      modelOutputName,
    });
    await addFineTuneEvent(tx, {
      jobId: id,
      type: 'job_pending',
      message: 'Fine-tuning job created.',
      dedupKey: 'job-pending',
    });
    // The files are in use from the moment the job exists: deleting one now answers 409.
    // The lease's foreign key locks the file row, so a concurrent file delete waits or wins cleanly.
    for (const fileId of [plan.training_file, plan.validation_file]) {
      if (fileId) await acquireFileLease(tx, fileId, fineTuneWorkflowId(id));
    }
    return job;
  });
  const input: FineTuneWorkflowInput = {
    jobId: id,
    projectId: principal.projectId,
    gpuType: model.gpuType,
    queueProbeSeconds: config.gpuQueueWaitSeconds,
    heartbeatTimeoutSeconds: config.trainingHeartbeatTimeoutSeconds,
  };
  // Its file leases go with it: a job that never started holds no file.
  await startResourceWorkflowOrUndo(
    temporal,
    {
      workflow: fineTune,
      workflowId: fineTuneWorkflowId(id),
      args: [input],
      projectId: principal.projectId,
      resourceType: FINE_TUNE_RESOURCE_TYPE,
      resourceId: id,
      status: 'pending',
      names: { projectSlug: principal.projectSlug, resource: body.suffix ?? id },
      summary: `Fine-tune ${id}: ${plan.method} ${plan.training_type} on ${model.name}`,
      details: `training file \`${plan.training_file}\`, ${plan.n_epochs} epochs, output \`${modelOutputName}\``,
    },
    () => deleteFineTuneRow(db, id),
  );
  return row;
}

/** Marks a job cancel_requested with its event (409 when it already finished), then cancels its workflow. */
export async function cancelFineTune(deps: ApiDeps, job: FineTuneRow): Promise<void> {
  const { db, temporal } = deps;
  const requested =
    !FINISHED_FINE_TUNE_STATUSES.includes(job.status) &&
    (await withTransaction(db, async (tx) => {
      if (!(await requestFineTuneCancel(tx, job.id))) return false;
      await addFineTuneEvent(tx, {
        jobId: job.id,
        type: 'cancel_requested',
        message: 'Cancellation requested.',
        dedupKey: 'cancel-requested',
      });
      return true;
    }));
  if (!requested) {
    const now = (await getFineTuneById(db, job.id))!;
    throw conflict(`Job '${job.id}' is already ${now.status}.`, 'job_finished');
  }
  try {
    await temporal.workflow.getHandle(fineTuneWorkflowId(job.id)).cancel();
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/**
 * Deletes a finished job and everything it stored. A job still running is a 409 unless `force`,
 * which terminates its workflow first (its activities stop at their next heartbeat). The blob
 * keys are listed before the row goes, since the checkpoints that name them go with it.
 */
export async function deleteFineTune(deps: ApiDeps, job: FineTuneRow, opts: { force: boolean }): Promise<void> {
  const { db, temporal, blobs } = deps;
  if (!FINISHED_FINE_TUNE_STATUSES.includes(job.status)) {
    if (!opts.force) {
      throw conflict(`Job '${job.id}' is ${job.status}; cancel it first, or delete with force=true.`, 'job_running');
    }
    try {
      await temporal.workflow.getHandle(fineTuneWorkflowId(job.id)).terminate('deleted with force=true');
    } catch (err) {
      if (!(err instanceof WorkflowNotFoundError)) throw err; // already gone: nothing to stop
    }
  }
  const keys = await deleteFineTuneRow(db, job.id, async (tx) => {
    const keys = [
      tokenizedDatasetArchiveKey(job.id),
      `fine-tunes/${job.id}/tokenized/train.jsonl`,
      `fine-tunes/${job.id}/tokenized/eval.jsonl`,
    ];
    for (const c of await listCheckpoints(tx, job.id)) {
      keys.push(...c.files.map((f) => `${c.blob_prefix}/${f}`));
      if (c.checkpoint_type === 'intermediate')
        keys.push(fineTuneDownloadKey(job.id, checkpointDownloadVariant(c.step)));
    }
    keys.push(...FINAL_DOWNLOAD_VARIANTS.map((variant) => fineTuneDownloadKey(job.id, variant)));
    return keys;
  });
  await deleteScheduledBlobs(db, blobs, keys);
}
