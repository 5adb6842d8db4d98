/**
 * Registers a completed fine-tune's weights in the model registry: the final
 * model (`<project_slug>/<model_name>`), for LoRA jobs the adapter
 * (`...-adapter`), and each intermediate checkpoint (`...-<step>`). Every
 * revision's files are copied under registry/<ml>/<rv>/ and validated (a
 * readable safetensors header; its tensors give the parameter count).
 *
 * Ids are derived from the job and the object's role, so a retried activity
 * rewrites the same objects instead of registering them twice.
 */
import { createHash } from 'node:crypto';
import { ApplicationFailure } from '@temporalio/activity';
import { reclaimBlobKeys } from '../db/blob-deletions';
import { addFineTuneEvent, getFineTuneById, listCheckpoints } from '../db/fine-tunes';
import type { Db } from '../db/pool';
import { withTransaction } from '../db/pool';
import { insertRegistryModel, insertRevision, qualifiedModelName, type WeightsType } from '../db/models';
import { findFineTuneModel } from '../fine-tunes/models';
import type { BlobStore } from '../providers/storage/blob-store';
import { safetensorsHeader } from '../providers/trainer/safetensors';

/** Files that are weights (optimizer and trainer state stay with the job). */
const WEIGHT_FILES: Record<'model' | 'adapter', string[]> = {
  model: ['model.safetensors', 'config.json'],
  adapter: ['adapter.safetensors', 'config.json'],
};

function derivedId(prefix: 'ml_' | 'rv_', ...parts: Array<string | number>): string {
  return prefix + createHash('sha256').update(parts.join('\u0000')).digest('hex').slice(0, 24);
}

export function createModelRegistryActivities({ db, blobs }: { db: Db; blobs: BlobStore }) {
  /** Copies one object's files into the registry and writes its model and revision rows. */
  async function register(o: {
    jobId: string;
    projectId: string;
    role: string;
    name: string;
    weightsType: WeightsType;
    baseModel: string;
    contextLength: number;
    sourcePrefix: string;
    files: string[];
  }): Promise<{ modelId: string; revisionId: string }> {
    const modelId = derivedId('ml_', o.jobId, o.role);
    const revisionId = derivedId('rv_', o.jobId, o.role);
    const prefix = `registry/${modelId}/${revisionId}`;
    // The keys are derived, not drawn: a retry writes them again, and a delete of the model between
    // two attempts may have recorded them for deletion (db/blob-deletions.ts). Taken back first.
    await reclaimBlobKeys(
      db,
      o.files.map((file) => `${prefix}/${file}`),
    );
    const stored: Array<{ path: string; bytes: number; sha256: string }> = [];
    let parameters = 0;
    for (const file of o.files) {
      const blob = await blobs.put(`${prefix}/${file}`, blobs.read(`${o.sourcePrefix}/${file}`), {
        maxBytes: Number.MAX_SAFE_INTEGER,
      });
      stored.push({ path: file, ...blob });
      if (file.endsWith('.safetensors')) {
        for (const t of Object.values(await safetensorsHeader(blobs, `${prefix}/${file}`))) {
          parameters += t.shape.reduce((a, b) => a * b, 1);
        }
      }
    }
    await withTransaction(db, async (tx) => {
      await tx.query('DELETE FROM registry_models WHERE id = $1', [modelId]); // a retry's earlier attempt
      await insertRegistryModel(tx, {
        id: modelId,
        projectId: o.projectId,
        name: o.name,
        description: `Fine-tuned by ${o.jobId} from ${o.baseModel}`,
        weightsType: o.weightsType,
        baseModel: o.baseModel,
        contextLength: o.contextLength,
        parametersTotal: parameters,
        sourceFineTuneId: o.jobId,
      });
      await insertRevision(tx, {
        id: revisionId,
        modelId,
        blobPrefix: prefix,
        files: stored,
        validationStatus: 'REVISION_VALIDATION_STATUS_SUCCESS',
      });
    });
    return { modelId, revisionId };
  }

  return {
    async registerFineTuneOutputs({ jobId }: { jobId: string }): Promise<{ modelObjectId: string }> {
      const job = await getFineTuneById(db, jobId);
      if (!job) throw ApplicationFailure.nonRetryable(`fine-tune ${jobId} no longer exists`, 'JobGone');
      const base = findFineTuneModel(job.plan.model);
      const lora = job.plan.training_type === 'lora';
      // model_output_name is `<slug>/<name>`; the registry stores the name and resolves the slug on read.
      const name = job.model_output_name.slice(job.model_output_name.indexOf('/') + 1);
      const common = {
        jobId,
        projectId: job.project_id,
        baseModel: job.plan.model,
        contextLength: job.plan.max_seq_length ?? base?.limits.max_seq_length_sft ?? 0,
      };
      const checkpoints = await listCheckpoints(db, jobId);
      const final = checkpoints.find((c) => c.checkpoint_type === 'final');
      if (!final) throw ApplicationFailure.nonRetryable(`${jobId} has no final weights to register`, 'NoFinalWeights');

      const model = await register({
        ...common,
        role: 'final-model',
        name,
        weightsType: 'WEIGHTS_TYPE_DEFAULT',
        sourcePrefix: final.blob_prefix,
        files: WEIGHT_FILES.model.filter((f) => final.files.includes(f)),
      });
      const adapter = lora
        ? await register({
            ...common,
            role: 'final-adapter',
            name: `${name}-adapter`,
            weightsType: 'WEIGHTS_TYPE_ADAPTER',
            sourcePrefix: final.blob_prefix,
            files: WEIGHT_FILES.adapter.filter((f) => final.files.includes(f)),
          })
        : null;
      for (const c of checkpoints.filter((c) => c.checkpoint_type === 'intermediate')) {
        const kind = lora ? 'adapter' : 'model';
        const objectName = `${name}-${c.step}`;
        const ids = await register({
          ...common,
          role: `checkpoint-${c.step}`,
          name: objectName,
          weightsType: lora ? 'WEIGHTS_TYPE_ADAPTER' : 'WEIGHTS_TYPE_DEFAULT',
          sourcePrefix: c.blob_prefix,
          files: WEIGHT_FILES[kind].filter((f) => c.files.includes(f)),
        });
        await db.query(
          `UPDATE fine_tune_checkpoints SET object_id = $3, object_revision_id = $4, object_name = $5
           WHERE job_id = $1 AND step = $2 AND checkpoint_type = 'intermediate'`,
          [jobId, c.step, ids.modelId, ids.revisionId, objectName],
        );
      }
      await db.query(
        `UPDATE fine_tunes SET model_object_id = $2, model_object_revision_id = $3, adapter_object_id = $4,
                adapter_object_revision_id = $5, adapter_output_name = $6, updated_at = now() WHERE id = $1`,
        [
          jobId,
          model.modelId,
          model.revisionId,
          adapter?.modelId ?? null,
          adapter?.revisionId ?? null,
          adapter ? `${job.model_output_name}-adapter` : null,
        ],
      );
      const { rows } = await db.query<{ id: string; name: string; project_slug: string | null }>(
        'SELECT m.id, m.name, p.slug AS project_slug FROM registry_models m LEFT JOIN projects p ON p.id = m.project_id WHERE m.id = $1',
        [model.modelId],
      );
      await addFineTuneEvent(db, {
        jobId,
        type: 'model_upload_complete',
        message:
          `Registered ${qualifiedModelName(rows[0])} (${model.modelId}, revision ${model.revisionId})` +
          (adapter ? ` and its adapter ${qualifiedModelName(rows[0])}-adapter (${adapter.modelId})` : '') +
          ` in the model registry.`,
        dedupKey: 'model-registered',
      });
      return { modelObjectId: model.modelId };
    },
  };
}

export type ModelRegistryActivities = ReturnType<typeof createModelRegistryActivities>;
