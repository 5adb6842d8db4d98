/**
 * Evaluations (`/v1/evaluation`; the SDKs' `evals`, the CLI's `together evals`): create, list,
 * retrieve, status. Each evaluation is the workflow `evaluation/<id>` (workflows/evaluations.ts);
 * what these routes answer is its row. The result file is the project's file (`GET
 * /v1/files/{id}/content`).
 */
import { getEvaluation, listEvaluations } from '../../db/evaluations';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  CreateEvaluationBody,
  CreateEvaluationResponseSchema,
  EvaluationJobSchema,
  EvaluationListSchema,
  EvaluationParams,
  EvaluationStatusSchema,
  ListEvaluationsQuery,
} from '../schemas/evaluations';
import { createEvaluation } from '../use-cases/evaluations';
import { toEvaluationJob } from '../presenters/evaluations';

/** The most evaluations a list answers when it names no limit (the SDKs type the list as a plain array). */
const LIST_LIMIT = 100;

export function addEvaluationRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;
  const find = async (projectId: string, id: string) => {
    const e = await getEvaluation(db, projectId, id);
    if (!e) throw notFound(`No evaluation '${id}' in this project.`);
    return e;
  };

  router.add({
    method: 'post',
    path: '/evaluation',
    operationId: 'createEvaluation',
    summary: "Judge every row of an eval file (classify, score or compare), durably, with the project's models",
    tags: ['evaluations'],
    strict: true,
    body: CreateEvaluationBody,
    errors: [503],
    response: { status: 200, description: 'The evaluation (pending)', schema: CreateEvaluationResponseSchema },
    handler: async ({ body, principal }) => ({
      workflow_id: await createEvaluation(deps, principal, body),
      status: 'pending' as const,
    }),
  });

  router.add({
    method: 'get',
    path: '/evaluation',
    operationId: 'listEvaluations',
    summary: "The project's evaluations, newest first",
    tags: ['evaluations'],
    strict: true,
    query: ListEvaluationsQuery,
    response: { status: 200, description: 'Evaluations', schema: EvaluationListSchema },
    handler: async ({ query, principal }) =>
      (await listEvaluations(db, principal.projectId, { status: query.status, limit: query.limit ?? LIST_LIMIT })).map(
        toEvaluationJob,
      ),
  });

  router.add({
    method: 'get',
    path: '/evaluation/:id',
    operationId: 'getEvaluation',
    summary: 'An evaluation: its parameters, status, results and the story of its status',
    tags: ['evaluations'],
    strict: true,
    params: EvaluationParams,
    errors: [404],
    response: { status: 200, description: 'The evaluation', schema: EvaluationJobSchema },
    handler: async ({ params, principal }) => toEvaluationJob(await find(principal.projectId, params.id)),
  });

  router.add({
    method: 'get',
    path: '/evaluation/:id/status',
    operationId: 'getEvaluationStatus',
    summary: "An evaluation's status and results",
    tags: ['evaluations'],
    strict: true,
    params: EvaluationParams,
    errors: [404],
    response: { status: 200, description: 'Its status', schema: EvaluationStatusSchema },
    handler: async ({ params, principal }) => {
      const e = await find(principal.projectId, params.id);
      return { status: e.status, results: e.results };
    },
  });
}
