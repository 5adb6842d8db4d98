/**
 * GPU clusters (spec: Clusters; paths of the SDK's beta.clusters): regions,
 * create, list, retrieve, update (PUT), delete and credentials. A create
 * checks every rule of the spec, writes the row and starts `cluster/<id>`;
 * changes are Updates to that workflow; reads come from PostgreSQL.
 */
import { REGIONS } from '../../shared/cluster-catalog';
import {
  getCluster,
  latestRemediationsOfClusters,
  listClusters,
  volumesOfClusters,
  type ClusterRow,
} from '../../db/clusters';
import type { Db } from '../../db/pool';
import { toCluster } from '../presenters/clusters';
import type { ApiDeps } from '../deps';
import { conflict } from '../errors';
import type { ApiRouter } from '../route';
import {
  ClusterDeleteSchema,
  ClusterIdParams,
  ClusterListSchema,
  ClusterSchema,
  CreateClusterBody,
  KubeconfigSchema,
  ListClustersQuery,
  RegionsSchema,
  UpdateClusterBody,
} from '../schemas/clusters';
import { changeCluster, createCluster, deleteCluster, requireCluster } from '../use-cases/clusters';

/** The spec's cluster objects of rows: their volumes and remediations read in one query each, however many. */
async function clusterObjects(db: Db, rows: ClusterRow[]) {
  const ids = rows.map((r) => r.id);
  const [volumes, latest] = await Promise.all([volumesOfClusters(db, ids), latestRemediationsOfClusters(db, ids)]);
  return rows.map((r) => toCluster(r, volumes.get(r.id) ?? [], latest.get(r.id) ?? new Map()));
}

async function clusterObject(db: Db, row: ClusterRow) {
  return (await clusterObjects(db, [row]))[0];
}

export function addClusterRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;

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
      return { clusters: await clusterObjects(db, rows) };
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
    handler: async ({ params, body, principal, idempotencyKey }) =>
      clusterObject(db, await changeCluster(deps, principal, params.cluster_id, body, idempotencyKey)),
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
      await deleteCluster(deps, principal, row);
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
      schema: KubeconfigSchema,
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
