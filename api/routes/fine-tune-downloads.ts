/**
 * What a fine-tuning job produced, for download:
 *
 *   GET /v1/finetune/download?ft_id=&checkpoint=&checkpoint_step=   weights as .tar.zst (SDK: fineTuning.content)
 *   GET /v1/fine-tunes/{id}/download-tokenized-dataset               a pre-signed URL of the tokenized dataset archive
 *   GET <that URL>                                                   the archive (no API key: the URL is signed)
 *   DELETE /v1/fine-tunes/{id}                                       the job and everything it stored
 */
import path from 'node:path';
import type { Request, Response } from 'express';
import type { z } from 'zod';
import {
  checkpointDownloadVariant,
  finalOutputPrefix,
  fineTuneDownloadKey,
  tokenizedDatasetArchiveKey,
} from '../../shared/fine-tunes';
import { getFineTune, getFineTuneById, listCheckpoints, type FineTuneRow } from '../../db/fine-tunes';
import { assertZstdAvailable, tarZstStream } from '../../providers/archive/tar-zst';
import type { ApiDeps } from '../deps';
import { badRequest, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { BinaryResponse, IdParams } from '../schemas/common';

import { downloadUrl, DownloadUrlQuery, verifyDownloadUrl } from '../uploads/presigned';
import { sendBlob } from '../blob-response';
import {
  DeleteFineTuneQuery,
  FineTuneDeletedSchema,
  FineTuneDownloadQuery,
  TokenizedDatasetUrlSchema,
} from '../schemas/fine-tunes';
import { deleteFineTune } from '../use-cases/fine-tunes';

const DOWNLOAD_TTL_SECONDS = 3600;
const tokenizedPath = (jobId: string) => `/v1/fine-tunes/${encodeURIComponent(jobId)}/tokenized-dataset`;

export function addFineTuneDownloadRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, blobs, config } = deps;

  /** The files to ship for a download request, as blob keys. */
  async function selectFiles(job: FineTuneRow, q: z.output<typeof FineTuneDownloadQuery>, step: number | undefined) {
    const lora = job.plan.training_type === 'lora';
    const checkpoints = await listCheckpoints(db, job.id);
    const final = checkpoints.find((x) => x.checkpoint_type === 'final');
    if (q.checkpoint_step !== undefined && (q.checkpoint_step === 0 || q.checkpoint_step === final?.step)) {
      step = undefined;
    }
    if (step !== undefined) {
      const c = checkpoints.find((x) => x.checkpoint_type === 'intermediate' && x.step === step);
      if (!c) {
        const steps = checkpoints.filter((x) => x.checkpoint_type === 'intermediate').map((x) => x.step);
        throw notFound(
          `Job '${job.id}' has no checkpoint at step ${step}; its checkpoints are at steps ${steps.join(', ') || 'none yet'}.`,
        );
      }
      // The weights of that step; the optimizer state stays behind (it is for resuming, not for use).
      return {
        files: c.files.filter((f) => f !== 'optimizer.safetensors').map((f) => `${c.blob_prefix}/${f}`),
        suffix: `-checkpoint-${step}`,
        variant: checkpointDownloadVariant(step),
      };
    }
    if (job.status !== 'completed' || !final) {
      throw notFound(`Job '${job.id}' has no final model yet (status ${job.status}).`);
    }
    const kind = q.checkpoint ?? (lora ? 'merged' : 'model_output_path');
    if (!lora && kind !== 'model_output_path') {
      throw badRequest(
        `Job '${job.id}' is a full fine-tune: its output is the whole model (checkpoint=model_output_path).`,
        'checkpoint',
      );
    }
    const wanted =
      kind === 'adapter'
        ? ['adapter.safetensors', 'config.json']
        : kind === 'merged'
          ? ['model.safetensors', 'config.json']
          : final.files;
    return {
      files: wanted.map((f) => `${finalOutputPrefix(job.id)}/${f}`),
      suffix: kind === 'adapter' ? '-adapter' : '',
      variant: kind,
    };
  }

  /**
   * The archive of `keys`, made once and kept with the job's blobs (`fineTuneDownloadKey`): a download's
   * bytes and size must not change between requests, since clients probe the size with a Range
   * request first and resume interrupted downloads from an offset. Deleted with the job.
   */
  async function packagedArchive(cacheKey: string, keys: string[]): Promise<number> {
    const made = await blobs.size(cacheKey);
    if (made !== null) return made;
    await assertZstdAvailable();
    const entries = [];
    let total = 0;
    for (const key of keys) {
      const size = await blobs.size(key);
      if (size === null) throw notFound(`A file of this download is missing from storage: ${path.basename(key)}.`);
      entries.push({ name: path.basename(key), size, open: () => blobs.read(key) });
      total += size;
    }
    // Compressed weights are not larger than the weights, plus tar's headers and zstd's frame.
    const stored = await blobs.put(cacheKey, tarZstStream(entries), { maxBytes: total + 1024 * (keys.length + 8) });
    return stored.bytes;
  }

  router.add({
    method: 'get',
    path: '/finetune/download',
    operationId: 'downloadFineTuneWeights',
    summary: 'Weights of a job (merged, adapter or the full output) or of one checkpoint, as .tar.zst',
    tags: ['fine-tuning'],
    query: FineTuneDownloadQuery,
    strict: true,
    errors: [404],
    response: {
      status: 200,
      description: 'A .tar.zst archive (206 for a range)',
      schema: BinaryResponse,
      mediaType: 'application/zstd',
    },
    handler: async ({ query, principal, req, res }) => {
      const [jobId, stepPart] = query.ft_id.split(':');
      const step = query.checkpoint_step ?? (stepPart !== undefined ? Number(stepPart) : undefined);
      if (step !== undefined && !Number.isInteger(step))
        throw badRequest(`Invalid checkpoint id '${query.ft_id}'.`, 'ft_id');
      const job = await getFineTune(db, principal.projectId, jobId);
      if (!job) throw notFound(`Fine-tuning job '${jobId}' not found.`);
      const { files, suffix, variant } = await selectFiles(job, query, step);
      const base = job.model_output_name.split('/').pop()!;
      const key = fineTuneDownloadKey(job.id, variant);
      const size = await packagedArchive(key, files);
      await sendBlob(req, res, blobs, {
        key,
        size,
        filename: `${base}${suffix}.tar.zst`,
        contentType: 'application/zstd',
      });
      return undefined;
    },
  });

  router.add({
    method: 'get',
    path: '/fine-tunes/:id/download-tokenized-dataset',
    operationId: 'retrieveTokenizedDataset',
    summary: "A pre-signed URL of the job's tokenized dataset archive; 404 until it exists",
    tags: ['fine-tuning'],
    params: IdParams,
    errors: [404],
    response: {
      status: 200,
      description: 'Where to fetch the archive',
      schema: TokenizedDatasetUrlSchema,
    },
    handler: async ({ params, principal }) => {
      const job = await getFineTune(db, principal.projectId, params.id);
      if (!job) throw notFound(`Fine-tuning job '${params.id}' not found.`);
      const size = await blobs.size(tokenizedDatasetArchiveKey(job.id));
      if (size === null)
        throw notFound(`Job '${job.id}' has no tokenized dataset archive yet.`, 'tokenized_dataset_not_ready');
      if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
      const expires = Math.floor(Date.now() / 1000) + DOWNLOAD_TTL_SECONDS;
      return {
        url: downloadUrl(config.publicUrl, config.keyring, tokenizedPath(job.id), principal.apiKeyId, expires),
        filename: `${job.id}-tokenized-dataset.tar.zst`,
        content_type: 'application/zstd',
        size,
        expires_at: new Date(expires * 1000).toISOString(),
      };
    },
  });

  router.addSigned(
    {
      method: 'get',
      path: '/fine-tunes/:id/tokenized-dataset',
      operationId: 'getTokenizedDatasetArchive',
      summary: 'The tokenized dataset archive at its pre-signed URL (from download-tokenized-dataset)',
      tags: ['fine-tuning'],
      params: IdParams,
      query: DownloadUrlQuery,
      errors: [403, 404],
      response: {
        status: 200,
        description: 'A .tar.zst archive',
        schema: BinaryResponse,
        mediaType: 'application/zstd',
      },
    },
    tokenizedDatasetHandler(deps),
  );

  router.add({
    method: 'delete',
    path: '/fine-tunes/:id',
    operationId: 'deleteFineTune',
    summary: 'Delete a finished job and everything it stored (force: cancel a running one first)',
    tags: ['fine-tuning'],
    params: IdParams,
    query: DeleteFineTuneQuery,
    errors: [404, 409],
    response: { status: 200, description: 'Deleted', schema: FineTuneDeletedSchema },
    handler: async ({ params, query, principal }) => {
      const job = await getFineTune(db, principal.projectId, params.id);
      if (!job) throw notFound(`Fine-tuning job '${params.id}' not found.`);
      await deleteFineTune(deps, job, { force: query.force === 'true' });
      return { message: `Fine-tuning job ${job.id} deleted.` };
    },
  });
}

/** GET of the tokenized dataset archive at its signed URL (no API key). */
function tokenizedDatasetHandler(deps: ApiDeps) {
  return async (req: Request, res: Response) => {
    if (!deps.config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
    const jobId = String(req.params.id);
    const principal = await verifyDownloadUrl(deps.config.keyring, deps.db, tokenizedPath(jobId), req.query);
    const job = await getFineTuneById(deps.db, jobId);
    const key = tokenizedDatasetArchiveKey(jobId);
    const size = job?.project_id === principal.projectId ? await deps.blobs.size(key) : null;
    if (size === null) throw notFound(`The tokenized dataset of '${jobId}' no longer exists.`);
    await sendBlob(req, res, deps.blobs, {
      key,
      size,
      filename: `${jobId}-tokenized-dataset.tar.zst`,
      contentType: 'application/zstd',
    });
  };
}
