/**
 * Remote model uploads (`/v2/projects/{projectId}/models/uploads`, the
 * official SDK's `beta.models.uploads`): import a model's files from a URL
 * into a registered model, as the workflow `model-upload/<id>` (started by
 * api/use-cases/model-uploads.ts). The URL is
 * checked there (http or https; public hosts unless the installation allows
 * private ones) and again by the worker on every redirect. A `token` is sealed
 * at rest, used only by the worker, and never returned.
 */
import { getUpload, listUploadEvents, listUploads } from '../../db/model-uploads';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { cursorPage, decodeCursor, encodeCursor, PageQuery } from '../cursor-pages';
import { ProjectParams } from '../schemas/common';
import {
  CreateModelUploadBody,
  ListModelUploadEventsQuery,
  ModelUploadEventPageSchema,
  ModelUploadPageSchema,
  UploadParams,
  UploadSchema,
} from '../schemas/models';
import { createModelUpload } from '../use-cases/model-uploads';
import { toUpload } from '../presenters/model-uploads';

export function addModelUploadRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

  async function requireUpload(projectId: string, id: string) {
    const u = await getUpload(db, projectId, id);
    if (!u) throw notFound(`Upload '${id}' not found.`);
    return u;
  }

  router.add({
    method: 'post',
    path: '/projects/:projectId/models/uploads',
    projectScope: 'key',
    operationId: 'createModelUpload',
    summary: "Import a model's files from a URL (a file, or a .tar, .tar.gz or .tar.zst archive) as a new revision",
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    body: CreateModelUploadBody,
    errors: [404, 503],
    response: { status: 200, description: 'The upload (pending)', schema: UploadSchema },
    handler: async ({ body, principal }) => toUpload(await createModelUpload(deps, principal, body)),
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models/uploads',
    projectScope: 'key',
    operationId: 'listModelUploads',
    summary: "The project's uploads, newest first, by cursor",
    tags: ['models'],
    strict: true,
    params: ProjectParams,
    query: PageQuery,
    errors: [404],
    response: {
      status: 200,
      description: 'Uploads',
      schema: ModelUploadPageSchema,
    },
    handler: async ({ params, query, principal }) => {
      const rows = await listUploads(db, principal.projectId, decodeCursor(query.after), query.limit + 1);
      return cursorPage(rows, query.limit, encodeCursor, toUpload);
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models/uploads/:id',
    projectScope: 'key',
    operationId: 'getModelUpload',
    summary: 'An upload: status, restarts and the revision it made',
    tags: ['models'],
    strict: true,
    params: UploadParams,
    errors: [404],
    response: { status: 200, description: 'The upload', schema: UploadSchema },
    handler: async ({ params, principal }) => {
      return toUpload(await requireUpload(principal.projectId, params.id));
    },
  });

  router.add({
    method: 'get',
    path: '/projects/:projectId/models/uploads/:id/events',
    projectScope: 'key',
    operationId: 'listModelUploadEvents',
    summary: 'What the importer did, in order (download, each file stored, validation, the outcome)',
    tags: ['models'],
    strict: true,
    params: UploadParams,
    query: ListModelUploadEventsQuery,
    errors: [404],
    response: {
      status: 200,
      description: 'Events',
      schema: ModelUploadEventPageSchema,
    },
    handler: async ({ params, query, principal }) => {
      const u = await requireUpload(principal.projectId, params.id);
      const rows = await listUploadEvents(db, u.id, Number(query.after ?? 0), query.limit + 1);
      const page = rows.slice(0, query.limit);
      return {
        object: 'list' as const,
        data: page.map((e) => ({
          id: e.id,
          createdAt: new Date(e.created_at).toISOString(),
          level: e.level,
          type: e.type,
          message: e.message,
        })),
        next_cursor: rows.length > query.limit ? page[page.length - 1].id : null,
      };
    },
  });
}
