/**
 * Batches (`/v1/batches`, the SDKs' `batches`, the CLI's `together batches`): create, list,
 * retrieve, cancel. Each batch is the workflow `batch/<id>` (workflows/batches.ts); what these
 * routes answer is its row. Output and error files are the project's files (`GET
 * /v1/files/{id}/content`), removed with the input after GANTRY_BATCH_RETENTION_DAYS.
 */
import { getBatch, listBatches } from '../../db/batches';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  BatchJobSchema,
  BatchListSchema,
  BatchParams,
  CreateBatchBody,
  CreateBatchResponseSchema,
} from '../schemas/batches';
import { cancelBatch, createBatch } from '../use-cases/batches';
import { toBatchJob } from '../presenters/batches';

/** The most batches a list answers (the SDKs type the list as a plain array, without pages). */
const LIST_LIMIT = 1000;

export function addBatchRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  router.add({
    method: 'post',
    path: '/batches',
    operationId: 'createBatch',
    summary: "Run every line of a batch-api file against an endpoint, durably, at the project's batch concurrency",
    tags: ['batches'],
    strict: true,
    body: CreateBatchBody,
    errors: [503],
    response: { status: 200, description: 'The batch (validating)', schema: CreateBatchResponseSchema },
    handler: async ({ body, principal }) => ({ job: toBatchJob(await createBatch(deps, principal, body)) }),
  });

  router.add({
    method: 'get',
    path: '/batches',
    operationId: 'listBatches',
    summary: "The project's batches, newest first",
    tags: ['batches'],
    strict: true,
    response: { status: 200, description: 'Batches', schema: BatchListSchema },
    handler: async ({ principal }) => (await listBatches(db, principal.projectId, LIST_LIMIT)).map(toBatchJob),
  });

  router.add({
    method: 'get',
    path: '/batches/:id',
    operationId: 'getBatch',
    summary: 'A batch: status, progress, output and error files',
    tags: ['batches'],
    strict: true,
    params: BatchParams,
    errors: [404],
    response: { status: 200, description: 'The batch', schema: BatchJobSchema },
    handler: async ({ params, principal }) => {
      const b = await getBatch(db, principal.projectId, params.id);
      if (!b) throw notFound(`No batch '${params.id}' in this project.`);
      return toBatchJob(b);
    },
  });

  router.add({
    method: 'post',
    path: '/batches/:id/cancel',
    operationId: 'cancelBatch',
    summary: 'Stop a batch: it ends CANCELLED with the lines answered so far in its output',
    tags: ['batches'],
    strict: true,
    params: BatchParams,
    errors: [404],
    response: { status: 200, description: 'The batch', schema: BatchJobSchema },
    handler: async ({ params, principal }) => toBatchJob(await cancelBatch(deps, principal, params.id)),
  });
}
