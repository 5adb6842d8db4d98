/**
 * Node remediations (`/compute/clusters/{cluster_id}/instances/{instance_id}/remediations`,
 * the SDK's beta.clusters.remediations): list, create, get, approve, reject,
 * cancel. Every change is an Update of the cluster workflow, whose validator
 * enforces the state rules (409 otherwise); the rows are its projection.
 */
import type { Remediation } from '../../shared/clusters';
import { createRemediationUpdate, reviewRemediationUpdate } from '../../workflows/clusters';
import { newId } from '../../platform/ids';
import { getRemediation, listRemediations } from '../../db/clusters';
import type { Principal } from '../../db/accounts';
import { updateCluster } from '../cluster-messages';
import type { ApiDeps } from '../deps';
import { conflict, notFound } from '../errors';
import type { ApiRouter } from '../route';
import {
  ApproveRemediationBody,
  CreateRemediationBody,
  CreateRemediationQuery,
  InstanceParams,
  ListRemediationsQuery,
  RejectRemediationBody,
  RemediationListSchema,
  RemediationParams,
  RemediationSchema,
} from '../schemas/clusters';
import { requireCluster } from '../use-cases/clusters';

/** The instance id that lists the remediations of every instance of a cluster. */
const ANY_INSTANCE = '-';

const who = (p: Principal) => `api-key:${p.apiKeyId}`;

export function addClusterRemediationRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal } = deps;
  const BASE = '/compute/clusters/:cluster_id/instances/:instance_id/remediations';

  /** The node's instance id, whichever of node id or instance id the caller used. */
  async function resolveInstance(projectId: string, clusterId: string, instanceOrNode: string) {
    const row = await requireCluster(db, projectId, clusterId);
    const nodes = [...row.state.gpu_worker_nodes, ...row.state.deleted_gpu_worker_nodes];
    const node = nodes.find((n) => n.instance_id === instanceOrNode || n.node_id === instanceOrNode);
    if (!node) throw notFound(`Cluster '${clusterId}' has no instance '${instanceOrNode}'.`);
    return { row, instanceId: node.instance_id };
  }

  async function requireRemediation(projectId: string, clusterId: string, instance: string, id: string) {
    const { instanceId } = await resolveInstance(projectId, clusterId, instance);
    const r = await getRemediation(db, clusterId, instanceId, id);
    if (!r) throw notFound(`Remediation '${id}' not found on instance '${instance}'.`);
    return r;
  }

  router.add({
    method: 'get',
    path: BASE,
    operationId: 'listRemediations',
    summary: "An instance's remediations (instance `-`: the whole cluster's), newest first by default",
    tags: ['clusters'],
    params: InstanceParams,
    query: ListRemediationsQuery,
    errors: [404],
    response: { status: 200, description: 'Remediations', schema: RemediationListSchema },
    handler: async ({ params, query, principal }) => {
      // `-` stands for every instance of the cluster (the Python CLI finds a remediation by id so).
      const instanceId =
        params.instance_id === ANY_INSTANCE
          ? (await requireCluster(db, principal.projectId, params.cluster_id), undefined)
          : (await resolveInstance(principal.projectId, params.cluster_id, params.instance_id)).instanceId;
      const offset = Number(query.page_token ?? 0);
      const page = await listRemediations(db, {
        clusterId: params.cluster_id,
        instanceId,
        states: query.state,
        modes: query.mode,
        triggers: query.trigger,
        newestFirst: query.order_by !== 'create_time' && query.order_by !== 'create_time asc',
        limit: query.page_size + 1,
        offset,
      });
      const hasNext = page.length > query.page_size;
      return {
        remediations: page.slice(0, query.page_size),
        has_next: hasNext,
        next_page_token: hasNext ? String(offset + query.page_size) : '',
      };
    },
  });

  router.add({
    method: 'post',
    path: BASE,
    operationId: 'createRemediation',
    summary: 'Repair an instance now (goes straight to PENDING)',
    tags: ['clusters'],
    params: InstanceParams,
    query: CreateRemediationQuery,
    body: CreateRemediationBody,
    errors: [404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The remediation', schema: RemediationSchema },
    handler: async ({ params, query, body, principal, idempotencyKey }) => {
      const { row, instanceId } = await resolveInstance(principal.projectId, params.cluster_id, params.instance_id);
      if (query.remediation_id) {
        // Idempotent: the same client id returns the remediation it created.
        const existing = await getRemediation(db, row.id, instanceId, query.remediation_id);
        if (existing) return existing;
      }
      if (row.deleted_at) throw conflict(`Cluster '${row.id}' was deleted.`, 'cluster_deleted');
      return updateCluster(
        temporal,
        row.id,
        createRemediationUpdate,
        {
          remediationId: query.remediation_id ?? newId('rem'),
          instanceId,
          mode: body.mode,
          reason: body.reason,
          requestedBy: who(principal),
        },
        idempotencyKey,
      );
    },
  });

  router.add({
    method: 'get',
    path: `${BASE}/:remediation_id`,
    operationId: 'getRemediation',
    summary: 'A remediation',
    tags: ['clusters'],
    params: RemediationParams,
    errors: [404],
    response: { status: 200, description: 'The remediation', schema: RemediationSchema },
    handler: async ({ params, principal }) =>
      requireRemediation(principal.projectId, params.cluster_id, params.instance_id, params.remediation_id),
  });

  const review =
    (action: 'approve' | 'reject' | 'cancel') =>
    async ({
      params,
      body,
      principal,
      idempotencyKey,
    }: {
      params: { cluster_id: string; instance_id: string; remediation_id: string };
      body?: unknown;
      principal: Principal;
      idempotencyKey?: string;
    }) => {
      const b = (body ?? {}) as { comment?: string; mode?: Remediation['mode'] };
      const r = await requireRemediation(
        principal.projectId,
        params.cluster_id,
        params.instance_id,
        params.remediation_id,
      );
      return updateCluster(
        temporal,
        r.cluster_id,
        reviewRemediationUpdate,
        { remediationId: r.id, action, comment: b.comment, mode: b.mode, by: who(principal) },
        idempotencyKey,
      );
    };

  router.add({
    method: 'post',
    path: `${BASE}/:remediation_id/approve`,
    operationId: 'approveRemediation',
    summary: 'Approve a remediation waiting in PENDING_APPROVAL (optionally with another mode)',
    tags: ['clusters'],
    params: RemediationParams,
    body: ApproveRemediationBody,
    errors: [404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The remediation', schema: RemediationSchema },
    handler: review('approve'),
  });

  router.add({
    method: 'post',
    path: `${BASE}/:remediation_id/reject`,
    operationId: 'rejectRemediation',
    summary: 'Reject a remediation waiting in PENDING_APPROVAL',
    tags: ['clusters'],
    params: RemediationParams,
    body: RejectRemediationBody,
    errors: [404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The remediation', schema: RemediationSchema },
    handler: review('reject'),
  });

  router.add({
    method: 'post',
    path: `${BASE}/:remediation_id/cancel`,
    operationId: 'cancelRemediation',
    summary: 'Cancel a remediation that has not started (PENDING_APPROVAL or PENDING)',
    tags: ['clusters'],
    params: RemediationParams,
    errors: [404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The remediation', schema: RemediationSchema },
    handler: review('cancel'),
  });
}
