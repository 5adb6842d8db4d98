/**
 * Container deployments (spec: Container deployments; the SDK's beta.jig):
 * deploy, list, retrieve, update (PATCH), destroy, logs; and deployment
 * secrets (values sealed at rest, never returned, never logged). Each
 * deployment is the entity workflow `deployment/<id>`; reads come from
 * PostgreSQL (the workflow's projection and the replicas' own records).
 */
import { endpointDeploymentOfContainer } from '../../db/endpoints';
import { getRevision, listRevisions } from '../../db/deployment-revisions';
import { newId } from '../../platform/ids';
import { projectImagePath } from '../../shared/image-references';
import {
  deleteSecret,
  getDeployment,
  getSecret,
  insertSecret,
  listDeployments,
  listReplicas,
  listSecrets,
  updateSecret,
  type DeploymentRow,
} from '../../db/deployments';
import { SEALED_COLUMNS, sealForRow } from '../../db/sealed-values';
import { cursorPage, decodeCursor, encodeCursor, WholeListPageQuery } from '../cursor-pages';
import type { ApiDeps } from '../deps';
import { tailLines } from '../../providers/containers/log-tail';
import { followLogs } from '../replica-logs';
import { badRequest, conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { replicaLogDir, replicaLogFile } from '../../providers/containers/replica-log';
import {
  changeContainerDeployment,
  deployContainer,
  destroyContainerDeployment,
  rollbackContainerDeployment,
} from '../use-cases/container-deployments';
import {
  CreateDeploymentBody,
  UpdateDeploymentBody,
  DeploymentSchema,
  DeploymentListSchema,
  DeploymentLogsQuery,
  DeploymentLogsSchema,
  ImageRepositoryBasePathSchema,
  SecretSchema,
  SecretListSchema,
  CreateSecretBody,
  UpdateSecretBody,
  DeploymentRevisionEventListSchema,
  DeploymentRevisionParams,
  DeploymentRevisionSchema,
  ListDeploymentRevisionsQuery,
  RollbackDeploymentBody,
} from '../schemas/deployments';
import { DeletedResponse, IdParams } from '../schemas/common';
import { toDeployment, toRevision, toRevisionEvent, toSecret } from '../presenters/deployments';

export function addDeploymentRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, config } = deps;
  const who = (apiKeyId: string) => `api-key:${apiKeyId}`;
  const present = async (row: DeploymentRow) => toDeployment(row, await listReplicas(db, row.id));

  router.add({
    method: 'get',
    path: '/image-repositories/base-path',
    operationId: 'getImageRepositoryBasePath',
    summary: "Where this project's deployment images are pushed (empty: the installation has no registry of its own)",
    tags: ['deployments'],
    strict: true,
    response: {
      status: 200,
      description: 'The base path',
      schema: ImageRepositoryBasePathSchema,
    },
    handler: async ({ principal }) => ({
      'base-path': config.imageRegistry ? projectImagePath(config.imageRegistry, principal.projectSlug) : '',
    }),
  });

  async function requireDeployment(projectId: string, id: string) {
    const row = await getDeployment(db, projectId, id);
    if (!row) throw notFound(`Deployment '${id}' not found.`);
    return row;
  }
  /** A deployment that serves an endpoint deployment is changed only through the endpoints API. */
  async function requireUnmanaged(row: { id: string; name: string }) {
    const endpoint = await endpointDeploymentOfContainer(db, row.id);
    if (endpoint)
      throw conflict(
        `Deployment '${row.name}' serves endpoint deployment ${endpoint.id}; change or delete it through /v2/projects/{projectId}/endpoints/${endpoint.endpoint_id}/deployments/${endpoint.id}.`,
        'deployment_managed_by_endpoint',
      );
  }
  // ---- secrets (before /deployments/:id) ----
  router.add({
    method: 'post',
    path: '/deployments/secrets',
    operationId: 'createDeploymentSecret',
    summary: 'Store a secret for deployments; its value is never returned',
    tags: ['deployments'],
    body: CreateSecretBody,
    errors: [409],
    response: { status: 200, description: 'The secret (without its value)', schema: SecretSchema },
    handler: async ({ body, principal }) => {
      if (body.project_id && body.project_id !== principal.projectId)
        throw badRequest("project_id must be the key's project.", 'project_id');
      if (!config.keyring) throw new Error('GANTRY_SIGNING_SECRET is not configured');
      if (await getSecret(db, principal.projectId, body.name))
        throw conflict(`A secret named '${body.name}' exists.`, 'secret_exists');
      const id = newId('sec');
      await insertSecret(db, {
        id,
        projectId: principal.projectId,
        name: body.name,
        description: body.description,
        sealed: sealForRow(
          config.keyring,
          SEALED_COLUMNS.deploymentSecret,
          { id, projectId: principal.projectId },
          body.value,
        ),
        by: who(principal.apiKeyId),
      });
      return toSecret((await getSecret(db, principal.projectId, id))!);
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/secrets',
    operationId: 'listDeploymentSecrets',
    summary: "The project's secrets (names and metadata only)",
    tags: ['deployments'],
    response: {
      status: 200,
      description: 'Secrets',
      schema: SecretListSchema,
    },
    handler: async ({ principal }) => ({
      object: 'list' as const,
      data: (await listSecrets(db, principal.projectId)).map(toSecret),
    }),
  });
  router.add({
    method: 'get',
    path: '/deployments/secrets/:id',
    operationId: 'getDeploymentSecret',
    summary: 'A secret (without its value)',
    tags: ['deployments'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'The secret', schema: SecretSchema },
    handler: async ({ params, principal }) => {
      const s = await getSecret(db, principal.projectId, params.id);
      if (!s) throw notFound(`Secret '${params.id}' not found.`);
      return toSecret(s);
    },
  });
  router.add({
    method: 'patch',
    path: '/deployments/secrets/:id',
    operationId: 'updateDeploymentSecret',
    summary: "Change a secret's value, name or description (replicas started afterwards see the new value)",
    tags: ['deployments'],
    params: IdParams,
    body: UpdateSecretBody,
    errors: [404, 409],
    response: { status: 200, description: 'The secret', schema: SecretSchema },
    handler: async ({ params, body, principal }) => {
      const s = await getSecret(db, principal.projectId, params.id);
      if (!s) throw notFound(`Secret '${params.id}' not found.`);
      if (body.name !== undefined && body.name !== s.name && (await getSecret(db, principal.projectId, body.name)))
        throw conflict(`A secret named '${body.name}' exists.`, 'secret_exists');
      await updateSecret(db, s.id, {
        name: body.name,
        description: body.description,
        sealed:
          body.value !== undefined
            ? sealForRow(
                config.keyring!,
                SEALED_COLUMNS.deploymentSecret,
                { id: s.id, projectId: principal.projectId },
                body.value,
              )
            : undefined,
        by: who(principal.apiKeyId),
      });
      return toSecret((await getSecret(db, principal.projectId, s.id))!);
    },
  });
  router.add({
    method: 'delete',
    path: '/deployments/secrets/:id',
    operationId: 'deleteDeploymentSecret',
    summary: 'Delete a secret',
    tags: ['deployments'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'Deleted', schema: DeletedResponse },
    handler: async ({ params, principal }) => {
      const s = await getSecret(db, principal.projectId, params.id);
      if (!s) throw notFound(`Secret '${params.id}' not found.`);
      await deleteSecret(db, s.id);
      return { id: s.id, deleted: true as const };
    },
  });

  // ---- deployments ----
  router.add({
    method: 'post',
    path: '/deployments',
    operationId: 'deployContainer',
    summary: 'Deploy a container: its replicas are run by the workflow deployment/<id>',
    tags: ['deployments'],
    body: CreateDeploymentBody,
    errors: [403, 409, 503],
    response: { status: 200, description: 'The deployment', schema: DeploymentSchema },
    handler: async ({ body, principal }) => {
      const id = await deployContainer(deps, principal, body);
      return present((await getDeployment(db, principal.projectId, id))!);
    },
  });
  router.add({
    method: 'get',
    path: '/deployments',
    operationId: 'listDeployments',
    summary: "The project's deployments, newest first, by cursor (unasked, a page of up to 1000)",
    tags: ['deployments'],
    query: WholeListPageQuery,
    response: {
      status: 200,
      description: 'Deployments',
      schema: DeploymentListSchema,
    },
    handler: async ({ principal, query }) => {
      const rows = await listDeployments(db, principal.projectId, decodeCursor(query.after), query.limit + 1);
      return cursorPage(rows, query.limit, encodeCursor, (r) => present(r));
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/:id',
    operationId: 'getDeployment',
    summary: 'A deployment, by id or name',
    tags: ['deployments'],
    params: IdParams,
    errors: [404],
    response: { status: 200, description: 'The deployment', schema: DeploymentSchema },
    handler: async ({ params, principal }) => present(await requireDeployment(principal.projectId, params.id)),
  });
  router.add({
    method: 'patch',
    path: '/deployments/:id',
    operationId: 'updateDeployment',
    summary: 'Change a deployment: replicas roll to the new revision one at a time',
    tags: ['deployments'],
    params: IdParams,
    body: UpdateDeploymentBody,
    errors: [403, 404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The deployment', schema: DeploymentSchema },
    handler: async ({ params, body, principal, idempotencyKey }) => {
      const row = await requireDeployment(principal.projectId, params.id);
      await requireUnmanaged(row);
      await changeContainerDeployment(deps, principal, row, body, idempotencyKey);
      return present((await getDeployment(db, principal.projectId, row.id))!);
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/:id/revisions',
    operationId: 'listDeploymentRevisions',
    summary: 'The revision history of a deployment, newest first (the 50 newest revisions are kept)',
    tags: ['deployments'],
    params: IdParams,
    query: ListDeploymentRevisionsQuery,
    errors: [404],
    response: { status: 200, description: 'Revision events', schema: DeploymentRevisionEventListSchema },
    handler: async ({ params, query, principal }) => {
      const row = await requireDeployment(principal.projectId, params.id);
      const revisions = await listRevisions(db, row.id, query);
      return { object: 'list' as const, data: revisions.map(toRevisionEvent) };
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/:id/revisions/:revision',
    operationId: 'getDeploymentRevision',
    summary: "A revision's spec; the deployment's current revision is always available",
    tags: ['deployments'],
    params: DeploymentRevisionParams,
    errors: [404],
    response: { status: 200, description: 'The revision', schema: DeploymentRevisionSchema },
    handler: async ({ params, principal }) => {
      const row = await requireDeployment(principal.projectId, params.id);
      const revision = Number(params.revision);
      const kept = await getRevision(db, row.id, revision);
      if (kept) return toRevision(kept.revision, kept.spec, kept.created_at);
      if (revision === row.state.revision) return toRevision(revision, row.state.spec, row.updated_at);
      throw notFound(`Revision ${revision} of deployment '${row.name}' is not kept.`, 'revision_not_found');
    },
  });
  router.add({
    method: 'post',
    path: '/deployments/:id/rollback',
    operationId: 'rollbackDeployment',
    summary: "Re-apply an earlier revision's spec: replicas roll to it as to any change",
    tags: ['deployments'],
    params: IdParams,
    body: RollbackDeploymentBody,
    errors: [403, 404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The deployment', schema: DeploymentSchema },
    handler: async ({ params, body, principal, idempotencyKey }) => {
      const row = await requireDeployment(principal.projectId, params.id);
      await requireUnmanaged(row);
      await rollbackContainerDeployment(deps, principal, row, Number(body.revision_identifier), idempotencyKey);
      return present((await getDeployment(db, principal.projectId, row.id))!);
    },
  });
  router.add({
    method: 'delete',
    path: '/deployments/:id',
    operationId: 'destroyDeployment',
    summary: 'Delete a deployment: replicas get their termination grace, then the deployment and its queue are gone',
    tags: ['deployments'],
    params: IdParams,
    errors: [404, 409],
    response: {
      status: 200,
      description: 'Deletion accepted',
      schema: DeletedResponse,
    },
    handler: async ({ params, principal }) => {
      const row = await requireDeployment(principal.projectId, params.id);
      await requireUnmanaged(row);
      await destroyContainerDeployment(deps, row);
      return { id: row.id, deleted: true as const };
    },
  });
  router.add({
    method: 'get',
    path: '/deployments/:id/logs',
    operationId: 'getDeploymentLogs',
    summary:
      "The replicas' output: the last 1000 lines of each (or of one replica); with follow=true, then new lines as NDJSON until the client disconnects",
    tags: ['deployments'],
    params: IdParams,
    query: DeploymentLogsQuery,
    errors: [404],
    response: { status: 200, description: 'Log lines', schema: DeploymentLogsSchema },
    handler: async ({ params, query, principal, req, res }) => {
      const row = await requireDeployment(principal.projectId, params.id);
      // File names come from the replicas table, never from the request.
      const sources = async () => {
        let replicas = await listReplicas(db, row.id);
        if (query.replica_id) replicas = replicas.filter((r) => r.replica_id === query.replica_id);
        if (query.revision) replicas = replicas.filter((r) => String(r.revision) === query.revision);
        return replicas.map((r) => ({
          replicaId: r.replica_id,
          file: replicaLogFile(replicaLogDir(config.dataDir), row.id, r.replica_id),
        }));
      };
      const first = await sources();
      if (query.replica_id && !first.length)
        throw notFound(`Deployment '${row.name}' has no replica '${query.replica_id}'.`);
      // The Python CLI's `logs --follow` asks for a stream by header, without follow=true.
      const streamAsked = req.get('x-stainless-raw-response') === 'stream';
      if (query.follow === 'true' || (query.follow === undefined && streamAsked)) {
        await followLogs(req, res, {
          tail: 1000,
          sources: async () => ((await getDeployment(db, principal.projectId, row.id)) ? sources() : null),
        });
        return undefined;
      }
      const tails = await Promise.all(
        first.map(async (s) => {
          const { lines } = await tailLines(s.file, 1000);
          return query.replica_id ? lines : lines.map((l) => `[${s.replicaId}] ${l}`);
        }),
      );
      return { lines: tails.flat() };
    },
  });
}
