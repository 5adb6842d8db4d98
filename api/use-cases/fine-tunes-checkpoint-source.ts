/**
 * from_checkpoint: `<job_id>` or `<output_model_name>`, each optionally
 * followed by `:<step>` (the final checkpoint when omitted). The checkpoint
 * must belong to a job of this project. The weights are read from the
 * checkpoint's registry revision when it has one (the registry owns that
 * copy), else from the job's own checkpoint blobs.
 */
import type { Queryable } from '../../db/pool';
import type { FineTuneRow } from '../../db/fine-tunes';
import { listCheckpoints } from '../../db/fine-tunes';
import { badRequest } from '../errors';
import type { CheckpointSource } from './fine-tunes-plan';

const FORMAT = /^(?<ref>[^:\s]+?)(?::(?<step>\d+))?$/;

export async function resolveCheckpointSource(
  db: Queryable,
  projectId: string,
  spec: string,
): Promise<CheckpointSource> {
  const m = FORMAT.exec(spec.trim());
  if (!m?.groups) {
    throw badRequest(
      `from_checkpoint must be '<job_id>' or '<output_model_name>', optionally followed by ':<step>'; got '${spec}'.`,
      'from_checkpoint',
    );
  }
  const { ref, step } = m.groups;
  const { rows } = await db.query<FineTuneRow>(
    'SELECT * FROM fine_tunes WHERE project_id = $1 AND (id = $2 OR model_output_name = $2)',
    [projectId, ref],
  );
  const job = rows[0];
  if (!job) throw badRequest(`No fine-tuning job '${ref}' in this project.`, 'from_checkpoint', 'checkpoint_not_found');
  const checkpoints = await listCheckpoints(db, job.id);
  const wanted =
    step === undefined
      ? checkpoints.find((c) => c.checkpoint_type === 'final')
      : (checkpoints.find((c) => c.checkpoint_type === 'intermediate' && c.step === Number(step)) ??
        checkpoints.find((c) => c.checkpoint_type === 'final' && c.step === Number(step)));
  if (!wanted) {
    const steps = checkpoints.map((c) => c.step).join(', ') || 'none yet';
    throw badRequest(
      step === undefined
        ? `Job '${job.id}' has no final checkpoint (status ${job.status}); name a step (checkpoints: ${steps}).`
        : `Job '${job.id}' has no checkpoint at step ${step} (checkpoints: ${steps}).`,
      'from_checkpoint',
      'checkpoint_not_found',
    );
  }
  const file = job.plan.training_type === 'lora' ? 'adapter.safetensors' : 'model.safetensors';
  let blobPrefix = wanted.blob_prefix;
  const objectId =
    wanted.checkpoint_type === 'final'
      ? job.plan.training_type === 'lora'
        ? job.adapter_object_id
        : job.model_object_id
      : wanted.object_id;
  if (objectId) {
    const rev = await db.query<{ blob_prefix: string }>(
      `SELECT r.blob_prefix FROM registry_model_revisions r JOIN registry_model_files f ON f.revision_id = r.id
       WHERE r.model_id = $1 AND f.path = $2 ORDER BY r.created_at DESC LIMIT 1`,
      [objectId, file],
    );
    if (rev.rows[0]) blobPrefix = rev.rows[0].blob_prefix;
  }
  return { spec, plan: job.plan, init: { blob_prefix: blobPrefix, file } };
}
