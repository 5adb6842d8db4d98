/**
 * Deployment profiles (`/v2/projects/{projectId}/configs`, the official SDK's
 * `beta.models.configs`): the settings a model family's server runs with
 * (`cr_…`). The installation's public profiles and the project's own are
 * listed, optionally for one model (`referenceModel` =
 * `projects/{p}/models/{id}`, or `referenceModelId`). Operators add profiles
 * (`POST /v1/admin/configs`); a deployment of a model whose family has more
 * than one must name the one it wants.
 */
import { newId } from '../../platform/ids';
import { getModelConfig, insertModelConfig, listModelConfigs } from '../../db/model-configs';
import type { ApiDeps } from '../deps';
import { DESCRIPTIVE_SELECTORS, PROFILE_SELECTORS, planServing } from '../endpoint-serving';
import { badRequest, notFound } from '../errors';
import { PUBLIC_PROJECT, type ApiRouter } from '../route';
import {
  CreateModelConfigBody,
  ListModelConfigsQuery,
  ModelConfigListSchema,
  ModelConfigParams,
  ModelConfigSchema,
} from '../schemas/endpoints';
import { cursorPage, decodeCursor, encodeCursor } from '../cursor-pages';
import { ProjectParams } from '../schemas/common';
import { toConfig } from '../presenters/model-configs';
import { projectExists } from '../../db/accounts';

export function addModelConfigRoutes(v2: ApiRouter, v1: ApiRouter, { db }: ApiDeps) {
  v2.add({
    method: 'get',
    path: '/projects/:projectId/configs',
    projectScope: 'key',
    operationId: 'listConfigs',
    summary: 'Deployment profiles this project can use, oldest first (optionally for one model)',
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    query: ListModelConfigsQuery,
    errors: [404],
    response: { status: 200, description: 'Profiles', schema: ModelConfigListSchema },
    handler: async ({ params, query, principal }) => {
      const fromName = query.referenceModel?.match(/^projects\/[^/]+\/models\/(.+)$/)?.[1];
      if (query.referenceModel && !fromName)
        throw badRequest('referenceModel is projects/{projectId}/models/{modelId}.', 'referenceModel');
      if (fromName && query.referenceModelId && fromName !== query.referenceModelId)
        throw badRequest('referenceModel and referenceModelId name different models.', 'referenceModelId');
      const modelId = fromName ?? query.referenceModelId;
      let family: string | undefined;
      if (modelId) {
        const plan = await planServing(db, principal.projectId, modelId);
        if (!plan) throw notFound(`Model '${modelId}' not found.`);
        family = plan.servable ? plan.family : modelId;
      }
      const rows = await listModelConfigs(db, principal.projectId, {
        family,
        after: decodeCursor(query.after),
        limit: query.limit + 1,
      });
      return cursorPage(rows, query.limit, encodeCursor, toConfig);
    },
  });
  v2.add({
    method: 'get',
    path: '/projects/:projectId/configs/:id',
    projectScope: 'key-or-public',
    operationId: 'getConfig',
    summary: 'A deployment profile and its selectors',
    tags: ['models'],
    strict: true,
    params: ModelConfigParams,
    errors: [404],
    response: { status: 200, description: 'The profile', schema: ModelConfigSchema },
    handler: async ({ params, principal }) => {
      // `public` holds the installation's own profiles (the resource names deployment profiles carry).
      const publicOnly = params.projectId === PUBLIC_PROJECT;
      const c = await getModelConfig(db, principal.projectId, params.id);
      if (!c || (publicOnly && c.project_id !== null)) throw notFound(`Config '${params.id}' not found.`);
      return toConfig(c);
    },
  });
  v1.add({
    method: 'post',
    path: '/admin/configs',
    operationId: 'createConfig',
    summary: 'Operators: add a deployment profile for a model family (public, or for one project)',
    tags: ['operators'],
    access: 'platform-admin',
    strict: true,
    body: CreateModelConfigBody,
    errors: [403],
    response: { status: 200, description: 'The profile', schema: ModelConfigSchema },
    handler: async ({ body, principal }) => {
      const plan = await planServing(db, principal.projectId, body.referenceModelId);
      if (!plan?.servable || plan.family !== body.referenceModelId)
        throw badRequest(
          `'${body.referenceModelId}' is not a model family a server on this installation runs.`,
          'referenceModelId',
        );
      for (const [i, s] of body.selectors.entries()) {
        const known = PROFILE_SELECTORS[s.key];
        if (!known && !DESCRIPTIVE_SELECTORS.includes(s.key))
          throw badRequest(
            `Unknown selector '${s.key}'; the reference model server takes ${[...Object.keys(PROFILE_SELECTORS), ...DESCRIPTIVE_SELECTORS].join(', ')}.`,
            `selectors[${i}].key`,
          );
        if (known && !known.check(s.value)) throw badRequest(`${s.key} is ${known.rule}.`, `selectors[${i}].value`);
      }
      if (body.projectId && !(await projectExists(db, body.projectId)))
        throw badRequest(`No project '${body.projectId}'.`, 'projectId');
      const id = newId('cr', '_');
      await insertModelConfig(db, {
        id,
        projectId: body.projectId ?? null,
        family: body.referenceModelId,
        selectors: body.selectors,
      });
      return toConfig((await getModelConfig(db, body.projectId ?? '', id))!);
    },
  });
}
