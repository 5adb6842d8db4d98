/**
 * Node remediations (`/compute/clusters/{cluster_id}/instances/{instance_id}/remediations`,
 * the SDK's beta.clusters.remediations): list, create, get, approve, reject,
 * cancel. The changes are use cases (api/use-cases/cluster-remediations.ts).
 */
import { listRemediations } from '../../db/clusters';
import type { ApiDeps } from '../deps';
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
import {
  requestRemediation,
  requireRemediation,
  resolveInstance,
  reviewRemediation,
} from '../use-cases/cluster-remediations';
import { requireCluster } from '../use-cases/clusters';

/** The instance id that lists the remediations of every instance of a cluster. */
const ANY_INSTANCE = '-';

const remediationRef = (p: { cluster_id: string; instance_id: string; remediation_id: string }) => ({
  clusterId: p.cluster_id,
  instance: p.instance_id,
  remediationId: p.remediation_id,
});

export function addClusterRemediationRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;
  const BASE = '/compute/clusters/:cluster_id/instances/:instance_id/remediations';

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
          : (await resolveInstance(db, principal.projectId, params.cluster_id, params.instance_id)).instanceId;
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
    handler: async ({ params, query, body, principal, idempotencyKey }) =>
      requestRemediation(
        deps,
        principal,
        { clusterId: params.cluster_id, instance: params.instance_id, remediationId: query.remediation_id },
        body,
        idempotencyKey,
      ),
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
    handler: async ({ params, principal }) => requireRemediation(db, principal.projectId, remediationRef(params)),
  });

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
    handler: async ({ params, body, principal, idempotencyKey }) =>
      reviewRemediation(
        deps,
        principal,
        remediationRef(params),
        { action: 'approve', comment: body.comment, mode: body.mode },
        idempotencyKey,
      ),
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
    handler: async ({ params, body, principal, idempotencyKey }) =>
      reviewRemediation(
        deps,
        principal,
        remediationRef(params),
        { action: 'reject', comment: body.comment },
        idempotencyKey,
      ),
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
    handler: async ({ params, principal, idempotencyKey }) =>
      reviewRemediation(deps, principal, remediationRef(params), { action: 'cancel' }, idempotencyKey),
  });
}
