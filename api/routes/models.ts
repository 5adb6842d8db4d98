/**
 * The model registry (`/v2/projects/{projectId}/models`, the official SDK's
 * `beta.models`): models (`ml_`) a project owns, their immutable revisions
 * (`rv_`) and files. Fine-tunes register their outputs here
 * (activities/models.ts); a model registered by hand gets its weights
 * from a remote upload. `{projectId}` is the key's project (its id or slug);
 * any other project is not found. Models shared with the organization
 * (VISIBILITY_INTERNAL) are listed to its other projects but changed only by
 * their own. Bodies and query strings are strict: an unknown field is a 400
 * naming it.
 */
import type { Principal } from '../../db/accounts';
import { listRegistryModels, listRevisionFiles, listRevisions } from '../../db/models';
import {
  changeRegistryModel,
  createRegistryModel,
  deleteRegistryModelAndFiles,
  requireOwnModel,
} from '../use-cases/registry-models';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { cursorPage, decodeCursor, encodeCursor, PageQuery } from '../cursor-pages';
import { EmptyResponse, OrganizationParams, ProjectParams } from '../schemas/common';
import {
  CreateModelBody,
  ListModelFilesQuery,
  ListModelsQuery,
  ModelFilePageSchema,
  ModelPageSchema,
  ModelParams,
  ModelRevisionPageSchema,
  ModelSchema,
  UpdateModelBody,
  UpdateModelQuery,
} from '../schemas/models';
import { toModel, toModelFiles, toModelRevision } from '../presenters/models';

export function addRegistryModelRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  /** A page of what the key's project sees: its own models and those its organization shares. */
  async function visibleModelsPage(
    principal: Principal,
    query: { after?: string; limit: number; visibility?: 'VISIBILITY_PRIVATE' | 'VISIBILITY_INTERNAL' },
  ) {
    const rows = await listRegistryModels(db, {
      projectId: principal.projectId,
      organizationId: principal.organizationId,
      visibility: query.visibility,
      after: decodeCursor(query.after),
      limit: query.limit + 1,
    });
    return cursorPage(rows, query.limit, encodeCursor, toModel);
  }

  /** A model the key's project owns (id or name): shared models of other projects are read-only here. */
  const ownModel = (principal: Principal, idOrName: string) => requireOwnModel(db, principal.projectId, idOrName);

  router.add({
    method: 'post',
    path: '/projects/:projectId/models',
    projectScope: 'key',
    operationId: 'createRegistryModel',
    summary: "Register a model (its weights come later, from a remote upload or a fine-tune's outputs)",
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    body: CreateModelBody,
    errors: [404, 409],
    response: { status: 200, description: 'The model', schema: ModelSchema },
    handler: async ({ params, body, principal }) => {
      return toModel(await createRegistryModel(deps, principal, body));
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models',
    projectScope: 'key',
    operationId: 'listRegistryModels',
    summary: "The project's models, and models its organization shares (newest first, by cursor)",
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    query: ListModelsQuery,
    errors: [404],
    response: {
      status: 200,
      description: 'Models',
      schema: ModelPageSchema,
    },
    handler: async ({ params, query, principal }) => {
      if (query.organizationId && query.organizationId !== principal.organizationId)
        throw notFound(`Organization '${query.organizationId}' not found.`);
      return visibleModelsPage(principal, query);
    },
  });

  router.add({
    method: 'get',
    path: '/organizations/:organizationId/models',
    operationId: 'listOrganizationModels',
    summary: "Models shared with the key's organization (VISIBILITY_INTERNAL), and the project's own",
    tags: ['models'],
    strict: true,
    params: OrganizationParams,
    query: PageQuery,
    errors: [404],
    response: {
      status: 200,
      description: 'Models',
      schema: ModelPageSchema,
    },
    handler: async ({ params, query, principal }) => {
      if (params.organizationId !== principal.organizationId)
        throw notFound(`Organization '${params.organizationId}' not found.`);
      return visibleModelsPage(principal, query);
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models/:id',
    projectScope: 'key',
    operationId: 'getRegistryModel',
    summary: 'A model, by id or name',
    tags: ['models'],
    strict: true,
    params: ModelParams,
    errors: [404],
    response: { status: 200, description: 'The model', schema: ModelSchema },
    handler: async ({ params, principal }) => {
      return toModel(await ownModel(principal, params.id));
    },
  });

  router.add({
    method: 'patch',
    path: '/projects/:projectId/models/:id',
    projectScope: 'key',
    operationId: 'updateRegistryModel',
    summary: 'Change name, description or visibility (updateMask names the fields; without it, all are set)',
    tags: ['models'],
    strict: true,
    params: ModelParams,
    query: UpdateModelQuery,
    body: UpdateModelBody,
    errors: [404, 409],
    response: { status: 200, description: 'The model', schema: ModelSchema },
    handler: async ({ params, query, body, principal }) => {
      const model = await ownModel(principal, params.id);
      return toModel(await changeRegistryModel(deps, principal, model, body, query.updateMask));
    },
  });

  router.add({
    method: 'delete',
    path: '/projects/:projectId/models/:id',
    projectScope: 'key',
    operationId: 'deleteRegistryModel',
    summary: 'Delete a model, its revisions and their files',
    tags: ['models'],
    strict: true,
    params: ModelParams,
    errors: [404],
    response: { status: 200, description: 'Deleted', schema: EmptyResponse },
    handler: async ({ params, principal, req }) => {
      const model = await ownModel(principal, params.id);
      const { failed } = await deleteRegistryModelAndFiles(deps, model);
      if (failed.length) req.log?.warn({ failed }, 'model files not deleted yet (the blob deletion rounds retry)');
      return {};
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models/:id/revisions',
    projectScope: 'key',
    operationId: 'listRegistryModelRevisions',
    summary: "A model's immutable revisions, newest first",
    tags: ['models'],
    strict: true,
    params: ModelParams,
    errors: [404],
    response: {
      status: 200,
      description: 'Revisions',
      schema: ModelRevisionPageSchema,
    },
    handler: async ({ params, principal }) => {
      const model = await ownModel(principal, params.id);
      return {
        object: 'list' as const,
        data: (await listRevisions(db, model.id)).map(toModelRevision),
        next_cursor: null,
      };
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models/:id/files',
    projectScope: 'key',
    operationId: 'listRegistryModelFiles',
    summary: 'The files of a revision (the newest unless revisionId names one), with sizes and SHA-256',
    tags: ['models'],
    strict: true,
    params: ModelParams,
    query: ListModelFilesQuery,
    errors: [404],
    response: {
      status: 200,
      description: 'Files',
      schema: ModelFilePageSchema,
    },
    handler: async ({ params, query, principal }) => {
      const model = await ownModel(principal, params.id);
      const revisions = await listRevisions(db, model.id);
      const revision = query.revisionId ? revisions.find((r) => r.id === query.revisionId) : revisions[0];
      if (query.revisionId && !revision) throw notFound(`Model '${model.id}' has no revision '${query.revisionId}'.`);
      const files = revision ? await listRevisionFiles(db, revision.id) : [];
      return toModelFiles(revision, files);
    },
  });
}
