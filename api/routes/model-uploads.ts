/**
 * Remote model uploads (`/v2/projects/{projectId}/models/uploads`, the
 * official SDK's `beta.models.uploads`): import a model's files from a URL
 * into a registered model, as the workflow `model-upload/<id>`. The URL is
 * checked here (http or https; public hosts unless the installation allows
 * private ones) and again by the worker on every redirect. A `token` is sealed
 * at rest, used only by the worker, and never returned.
 */
import { newId } from '../../platform/ids';
import {
  deleteUploadRow,
  getUpload,
  insertUpload,
  listUploadEvents,
  listUploads,
  type UploadRow,
} from '../../db/model-uploads';
import { findRegistryModelsByName, getRegistryModel } from '../../db/models';
import { SEALED_COLUMNS, sealForRow } from '../../db/sealed-values';
import { checkRemoteUrl, RemoteFetchRefused } from '../../providers/remote/fetch-remote';
import { modelUpload } from '../../workflows/model-uploads';
import type { ApiDeps } from '../deps';
import { badRequest, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { startResourceWorkflowOrUndo } from '../workflows';
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

/** Attempts after the first that an import gets (a lost worker, a dropped connection). */
const MAX_RESTARTS = 3;
const toUpload = (u: UploadRow) => ({
  id: u.id,
  createdAt: new Date(u.created_at).toISOString(),
  modelId: u.model_id,
  projectId: u.project_id,
  remoteUrl: u.remote_url,
  status: u.status,
  maxRestarts: u.max_restarts,
  restartCount: u.restart_count,
  ...(u.status_message ? { statusMessage: u.status_message } : {}),
  ...(u.revision_id ? { revisionId: u.revision_id } : {}),
  updatedAt: new Date(u.updated_at).toISOString(),
});

export function addModelUploadRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal, config } = deps;

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
    handler: async ({ params, body, principal }) => {
      const model =
        (await getRegistryModel(db, principal.projectId, body.modelId)) ??
        (await findRegistryModelsByName(db, principal.projectId, body.modelId))[0];
      if (!model) throw badRequest(`Model '${body.modelId}' is not registered in this project.`, 'modelId');
      try {
        await checkRemoteUrl(body.remoteUrl, config.remoteFetch);
      } catch (err) {
        if (err instanceof RemoteFetchRefused) throw badRequest(err.message, 'remoteUrl');
        throw badRequest(`The host of remoteUrl could not be resolved: ${(err as Error).message}`, 'remoteUrl');
      }
      if (body.token && !config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
      const id = newId('mu', '_');
      await insertUpload(db, {
        id,
        projectId: principal.projectId,
        modelId: model.id,
        remoteUrl: body.remoteUrl,
        sealedToken: body.token
          ? sealForRow(
              config.keyring!,
              SEALED_COLUMNS.registryUploadToken,
              { id, projectId: principal.projectId },
              body.token,
            )
          : undefined,
        maxRestarts: MAX_RESTARTS,
      });
      await startResourceWorkflowOrUndo(
        temporal,
        {
          workflow: modelUpload,
          workflowId: `model-upload/${id}`,
          args: [{ uploadId: id, modelId: model.id, maxRestarts: MAX_RESTARTS }],
          projectId: principal.projectId,
          resourceType: 'model-upload',
          resourceId: id,
          status: 'REMOTE_UPLOAD_STATUS_PENDING',
          summary: `Upload into ${model.id} from ${new URL(body.remoteUrl).host}`,
          details: `Created by API key \`${principal.apiKeyId}\`.`,
        },
        () => deleteUploadRow(db, id),
      );
      return toUpload((await getUpload(db, principal.projectId, id))!);
    },
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
