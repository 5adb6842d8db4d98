/**
 * Fine-tuning jobs (spec: Fine-tuning; the SDK's fineTuning resource for
 * shapes). Create checks every rule, writes the job and starts its workflow
 * (`fine-tune/<ft-id>`); reads come from PostgreSQL; cancel is a workflow
 * cancellation that stops the trainer.
 */
import {
  getFineTune,
  listCheckpoints,
  listFineTuneEvents,
  listFineTunes,
  listMetrics,
  resolveFineTuneObjectNames,
} from '../../db/fine-tunes';
import { findFineTuneModel } from '../../fine-tunes/models';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CreateFineTuneBody,
  FineTuneCheckpointListSchema,
  FineTuneEventListSchema,
  FineTuneListSchema,
  FineTuneMetricsSchema,
  FineTuneSchema,
  ModelLimitsQuery,
  ModelLimitsSchema,
} from '../schemas/fine-tunes';
import { IdParams } from '../schemas/common';
import { toCheckpoints, toEvent, toFineTune, toMetrics } from '../presenters/fine-tunes';
import { cancelFineTune, createFineTune } from '../use-cases/fine-tunes';
import { FineTuneMetricsQuery } from '../schemas/fine-tunes';

export function addFineTuneRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  const findJob = async (projectId: string, id: string) => {
    const row = await getFineTune(db, projectId, id);
    if (!row) throw notFound(`Fine-tuning job '${id}' not found.`);
    return row;
  };

  router.add({
    method: 'get',
    path: '/fine-tunes/models/limits',
    operationId: 'fineTuneModelLimits',
    summary: 'Limits of a base model for fine-tuning',
    tags: ['fine-tuning'],
    query: ModelLimitsQuery,
    strict: true,
    errors: [404],
    response: { status: 200, description: 'The limits', schema: ModelLimitsSchema },
    handler: async ({ query }) => {
      const model = findFineTuneModel(query.model_name);
      if (!model) throw notFound(`Base model '${query.model_name}' cannot be fine-tuned here.`, 'model_not_available');
      return model.limits;
    },
  });

  router.add({
    method: 'post',
    path: '/fine-tunes',
    operationId: 'createFineTune',
    summary: 'Start a fine-tuning job',
    tags: ['fine-tuning'],
    body: CreateFineTuneBody,
    errors: [402, 503],
    response: { status: 200, description: 'The job, status pending', schema: FineTuneSchema },
    handler: async ({ body, principal }) => toFineTune(await createFineTune(deps, principal, body)),
  });

  router.add({
    method: 'get',
    path: '/fine-tunes',
    operationId: 'listFineTunes',
    summary: "The project's fine-tuning jobs, newest first",
    tags: ['fine-tuning'],
    response: { status: 200, description: 'Jobs', schema: FineTuneListSchema },
    handler: async ({ principal }) => ({
      object: 'list' as const,
      data: (await listFineTunes(db, principal.projectId)).map((r) => toFineTune(r)),
    }),
  });

  router.add({
    method: 'get',
    path: '/fine-tunes/:id',
    operationId: 'retrieveFineTune',
    summary: 'A fine-tuning job with its events',
    tags: ['fine-tuning'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'The job', schema: FineTuneSchema },
    handler: async ({ params, principal }) => {
      const row = await findJob(principal.projectId, params.id);
      return toFineTune(row, await listFineTuneEvents(db, row.id), await resolveFineTuneObjectNames(db, row));
    },
  });

  router.add({
    method: 'get',
    path: '/fine-tunes/:id/events',
    operationId: 'listFineTuneEvents',
    summary: "A job's events, oldest first",
    tags: ['fine-tuning'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'Events', schema: FineTuneEventListSchema },
    handler: async ({ params, principal }) => {
      const row = await findJob(principal.projectId, params.id);
      return { data: (await listFineTuneEvents(db, row.id)).map(toEvent) };
    },
  });

  router.add({
    method: 'get',
    path: '/fine-tunes/:id/checkpoints',
    operationId: 'listFineTuneCheckpoints',
    summary: "A job's checkpoints, by step",
    tags: ['fine-tuning'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'Checkpoints', schema: FineTuneCheckpointListSchema },
    handler: async ({ params, principal }) => {
      const row = await findJob(principal.projectId, params.id);
      const names = await resolveFineTuneObjectNames(db, row);
      return { data: toCheckpoints(row, await listCheckpoints(db, row.id), names) };
    },
  });

  router.add({
    method: 'get',
    path: '/fine-tunes/:id/metrics',
    operationId: 'listFineTuneMetrics',
    summary: 'Training metrics by step (loss, learning rate, gradient norm, eval loss)',
    tags: ['fine-tuning'],
    params: IdParams,
    query: FineTuneMetricsQuery,
    errors: [404],
    response: { status: 200, description: 'Metrics', schema: FineTuneMetricsSchema },
    handler: async ({ params, query, principal }) => {
      const row = await findJob(principal.projectId, params.id);
      const from = query.logged_at_from ? Date.parse(query.logged_at_from) : -Infinity;
      const to = query.logged_at_to ? Date.parse(query.logged_at_to) : Infinity;
      const metrics = (await listMetrics(db, row.id)).filter((m) => {
        const at = new Date(m.logged_at).getTime();
        return (
          m.step >= (query.global_step_from ?? -Infinity) &&
          m.step <= (query.global_step_to ?? Infinity) &&
          at >= from &&
          at <= to
        );
      });
      return { metrics: toMetrics(metrics, query.resolution) };
    },
  });

  router.add({
    method: 'post',
    path: '/fine-tunes/:id/cancel',
    operationId: 'cancelFineTune',
    summary: 'Cancel a job: training stops after its current step',
    tags: ['fine-tuning'],
    params: IdParams,
    errors: [404, 409],
    response: { status: 200, description: 'The job, status cancel_requested', schema: FineTuneSchema },
    handler: async ({ params, principal }) => {
      const row = await findJob(principal.projectId, params.id);
      await cancelFineTune(deps, row);
      return toFineTune((await getFineTune(db, principal.projectId, row.id))!);
    },
  });
}
