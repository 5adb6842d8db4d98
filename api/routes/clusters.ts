/**
 * GPU clusters (spec: Clusters; paths of the SDK's beta.clusters): regions,
 * create, list, retrieve, update (PUT), delete and credentials. A create
 * checks every rule of the spec, writes the row and starts `cluster/<id>`;
 * changes are Updates to that workflow; reads come from PostgreSQL.
 */
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { REGIONS } from '../../shared/cluster-catalog';
import { CLUSTER_RESOURCE_TYPE } from '../../shared/clusters';
import { getCluster, latestRemediations, listClusters, volumesOfCluster, type ClusterRow } from '../../db/clusters';
import type { Db } from '../../db/pool';
import { deleteClusterUpdate, updateClusterUpdate, cluster } from '../../workflows/clusters';
import { updateCluster } from '../cluster-messages';
import { toCluster } from '../cluster-view';
import type { ApiDeps } from '../deps';
import { ApiError, conflict } from '../errors';
import type { ApiRouter } from '../route';
import {
  ClusterDeleteSchema,
  ClusterIdParams,
  ClusterListSchema,
  ClusterSchema,
  CreateClusterBody,
  ListClustersQuery,
  RegionsSchema,
  UpdateClusterBody,
} from '../schemas/clusters';
import { startResourceWorkflow } from '../workflows';
import { createCluster, requireCluster } from '../use-cases/clusters';
import { z } from 'zod';

async function clusterObject(db: Db, row: ClusterRow) {
  return toCluster(row, await volumesOfCluster(db, row.id), await latestRemediations(db, row.id));
}

/** Starts a cluster run that goes straight to tear-down, for a cluster whose workflow ended without deleting it. */
async function tearDownOrphanedCluster(
  temporal: ApiDeps['temporal'],
  config: ApiDeps['config'],
  row: ClusterRow,
  reason: string,
): Promise<void> {
  const state = row.state;
  try {
    await startResourceWorkflow(temporal, {
      workflow: cluster,
      workflowId: row.workflow_id,
      args: [
        {
          clusterId: row.id,
          projectId: row.project_id,
          spec: state.spec,
          counts: state.counts,
          settings: config.clusterSettings,
          carried: state,
          deleteOnStart: reason,
        },
      ],
      projectId: row.project_id,
      resourceType: CLUSTER_RESOURCE_TYPE,
      resourceId: row.id,
      status: 'Deleting',
      gpuType: state.spec.gpu_type,
      summary: `Tear-down of cluster ${state.spec.cluster_name} (${row.id}), whose workflow had ended`,
      details: `Its last run ended without deleting it; this run releases what it holds: ${reason}.`,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err; // a concurrent DELETE started it
  }
}

export function addClusterRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db, temporal, config } = deps;

  router.add({
    method: 'get',
    path: '/compute/regions',
    operationId: 'listClusterRegions',
    summary: 'Regions, their GPU types and driver/CUDA images (nvidia_version_id); no prices',
    tags: ['clusters'],
    response: { status: 200, description: 'Regions', schema: RegionsSchema },
    handler: async () => ({ regions: REGIONS.map((r) => ({ ...r })) }),
  });

  router.add({
    method: 'post',
    path: '/compute/clusters',
    operationId: 'createCluster',
    summary: 'Create a GPU cluster; it is provisioned by the workflow cluster/<id>',
    tags: ['clusters'],
    body: CreateClusterBody,
    errors: [503],
    response: { status: 200, description: 'The cluster, queued', schema: ClusterSchema },
    handler: async ({ body, principal }) => {
      const clusterId = await createCluster(deps, principal, body);
      return clusterObject(db, (await getCluster(db, principal.projectId, clusterId))!);
    },
  });

  router.add({
    method: 'get',
    path: '/compute/clusters',
    operationId: 'listClusters',
    summary: "The project's clusters (deleted ones stay readable by id)",
    tags: ['clusters'],
    query: ListClustersQuery,
    response: { status: 200, description: 'Clusters', schema: ClusterListSchema },
    handler: async ({ query, principal }) => {
      // The SDK's projectId filter: only the key's own project can be listed.
      if (query.projectId && query.projectId !== principal.projectId) return { clusters: [] };
      const rows = await listClusters(db, principal.projectId);
      return { clusters: await Promise.all(rows.map((r) => clusterObject(db, r))) };
    },
  });

  router.add({
    method: 'get',
    path: '/compute/clusters/:cluster_id',
    operationId: 'getCluster',
    summary: 'A GPU cluster',
    tags: ['clusters'],
    params: ClusterIdParams,
    errors: [404],
    response: { status: 200, description: 'The cluster', schema: ClusterSchema },
    handler: async ({ params, principal }) =>
      clusterObject(db, await requireCluster(db, principal.projectId, params.cluster_id)),
  });

  router.add({
    method: 'put',
    path: '/compute/clusters/:cluster_id',
    operationId: 'updateCluster',
    summary: 'Resize a cluster or change its preemptible GPUs, reservation end, add-ons or config',
    tags: ['clusters'],
    params: ClusterIdParams,
    body: UpdateClusterBody,
    errors: [404, 409],
    idempotencyKey: true,
    response: { status: 200, description: 'The cluster; resizing proceeds asynchronously', schema: ClusterSchema },
    handler: async ({ params, body, principal, idempotencyKey }) => {
      const row = await requireCluster(db, principal.projectId, params.cluster_id);
      if (row.deleted_at) throw conflict(`Cluster '${row.id}' was deleted.`, 'cluster_deleted');
      await updateCluster(temporal, row.id, updateClusterUpdate, body, idempotencyKey);
      return clusterObject(db, (await getCluster(db, principal.projectId, row.id))!);
    },
  });

  router.add({
    method: 'delete',
    path: '/compute/clusters/:cluster_id',
    operationId: 'deleteCluster',
    summary: 'Delete a cluster: nodes are drained and released, volumes released; the row stays readable',
    tags: ['clusters'],
    params: ClusterIdParams,
    errors: [404],
    response: { status: 200, description: 'Deletion accepted', schema: ClusterDeleteSchema },
    handler: async ({ params, principal }) => {
      const row = await requireCluster(db, principal.projectId, params.cluster_id);
      if (!row.deleted_at) {
        const reason = 'deleted through the API';
        try {
          await updateCluster(temporal, row.id, deleteClusterUpdate, { reason });
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 409)) throw err;
          // A 409 from the workflow itself: it is being deleted already. Otherwise its workflow is gone
          // without having deleted it (it failed, or was terminated): a new run from the last projected
          // state tears it down, so nothing held for it is left behind.
          if (err.code !== 'cluster_not_running') return { cluster_id: row.id };
          const fresh = await getCluster(db, principal.projectId, row.id);
          if (fresh && !fresh.deleted_at) await tearDownOrphanedCluster(temporal, config, fresh, reason);
        }
      }
      return { cluster_id: row.id };
    },
  });

  router.add({
    method: 'get',
    path: '/compute/clusters/:cluster_id/credentials',
    operationId: 'getClusterCredentials',
    summary: "Download the cluster's kubeconfig",
    tags: ['clusters'],
    params: ClusterIdParams,
    errors: [404, 409],
    response: {
      status: 200,
      description: 'kubeconfig (YAML)',
      schema: z.string(),
      mediaType: 'application/yaml',
    },
    handler: async ({ params, principal, res }) => {
      const row = await requireCluster(db, principal.projectId, params.cluster_id);
      if (row.state.spec.cluster_type !== 'KUBERNETES') {
        throw conflict('SLURM clusters have no kubeconfig; log in to the Slurm login node instead.', 'no_kubeconfig');
      }
      if (row.deleted_at)
        throw conflict(`Cluster '${row.id}' was deleted; its credentials are revoked.`, 'cluster_deleted');
      if (!row.kube_config) {
        throw conflict(
          `Cluster '${row.id}' has no control plane yet (status ${row.status}); try again shortly.`,
          'not_ready',
        );
      }
      res
        .status(200)
        .type('application/yaml')
        .setHeader('Content-Disposition', `attachment; filename="${row.id}-kubeconfig.yaml"`);
      res.setHeader('Cache-Control', 'no-store');
      res.send(row.kube_config);
      return undefined;
    },
  });
}
