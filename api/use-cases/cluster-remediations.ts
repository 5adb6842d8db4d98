/**
 * Node remediations: every change is an Update of the cluster workflow, whose validator enforces
 * the state rules (409 otherwise); the rows are its projection. An instance is addressed by its
 * instance id or its node id, whichever the caller has.
 */
import type { z } from 'zod';
import type { Principal } from '../../db/accounts';
import { getRemediation, type ClusterRow } from '../../db/clusters';
import type { Db } from '../../db/pool';
import { newId } from '../../platform/ids';
import { clusterWorkflowId, type Remediation } from '../../shared/clusters';
import { createRemediationUpdate, reviewRemediationUpdate } from '../../workflows/clusters';
import type { ApiDeps } from '../deps';
import { conflict, notFound } from '../errors';
import type { CreateRemediationBody } from '../schemas/clusters';
import { executeEntityUpdate } from '../workflows';
import { clusterNotRunning, requireCluster } from './clusters';

/** Who asked, as the remediation records it. */
const requester = (p: Principal) => `api-key:${p.apiKeyId}`;

/** The cluster and the node's instance id, whichever of node id or instance id the caller used (404 otherwise). */
export async function resolveInstance(
  db: Db,
  projectId: string,
  clusterId: string,
  instanceOrNode: string,
): Promise<{ row: ClusterRow; instanceId: string }> {
  const row = await requireCluster(db, projectId, clusterId);
  const nodes = [...row.state.gpu_worker_nodes, ...row.state.deleted_gpu_worker_nodes];
  const node = nodes.find((n) => n.instance_id === instanceOrNode || n.node_id === instanceOrNode);
  if (!node) throw notFound(`Cluster '${clusterId}' has no instance '${instanceOrNode}'.`);
  return { row, instanceId: node.instance_id };
}

/** The remediation on that instance, or a 404 naming it. */
export async function requireRemediation(
  db: Db,
  projectId: string,
  ref: { clusterId: string; instance: string; remediationId: string },
): Promise<Remediation> {
  const { instanceId } = await resolveInstance(db, projectId, ref.clusterId, ref.instance);
  const r = await getRemediation(db, ref.clusterId, instanceId, ref.remediationId);
  if (!r) throw notFound(`Remediation '${ref.remediationId}' not found on instance '${ref.instance}'.`);
  return r;
}

/**
 * Asks the cluster workflow for a remediation of one node. With the client's own
 * `remediationId`, asking again returns the remediation it created.
 */
export async function requestRemediation(
  deps: ApiDeps,
  principal: Principal,
  target: { clusterId: string; instance: string; remediationId?: string },
  body: z.output<typeof CreateRemediationBody>,
  idempotencyKey: string | undefined,
): Promise<Remediation> {
  const { db, temporal } = deps;
  const { row, instanceId } = await resolveInstance(db, principal.projectId, target.clusterId, target.instance);
  if (target.remediationId) {
    const existing = await getRemediation(db, row.id, instanceId, target.remediationId);
    if (existing) return existing;
  }
  if (row.deleted_at) throw conflict(`Cluster '${row.id}' was deleted.`, 'cluster_deleted');
  return executeEntityUpdate(
    temporal,
    clusterWorkflowId(row.id),
    createRemediationUpdate,
    [
      {
        remediationId: target.remediationId ?? newId('rem'),
        instanceId,
        mode: body.mode,
        reason: body.reason,
        requestedBy: requester(principal),
      },
    ],
    idempotencyKey,
    clusterNotRunning(row.id),
  );
}

/** Approves (optionally with another mode), rejects or cancels a remediation; the workflow says whether its state allows it. */
export async function reviewRemediation(
  deps: ApiDeps,
  principal: Principal,
  ref: { clusterId: string; instance: string; remediationId: string },
  review: { action: 'approve' | 'reject' | 'cancel'; comment?: string; mode?: Remediation['mode'] },
  idempotencyKey: string | undefined,
): Promise<Remediation> {
  const r = await requireRemediation(deps.db, principal.projectId, ref);
  return executeEntityUpdate(
    deps.temporal,
    clusterWorkflowId(r.cluster_id),
    reviewRemediationUpdate,
    [{ remediationId: r.id, ...review, by: requester(principal) }],
    idempotencyKey,
    clusterNotRunning(r.cluster_id),
  );
}
