/**
 * Operator controls of the local fleet SIMULATOR (admin only): inject faults
 * (a node that never boots, failed acceptance / NCCL / health checks), hold
 * back preemptible capacity, report a cluster's workload to its autoscaler,
 * and deliver a preemption notice. A real fleet reports these by itself; here
 * they let a person (or a test) drive every path of the cluster workflow.
 */
import { FleetControls } from '../../providers/compute/local-fleet';
import type { ApiDeps } from '../deps';
import type { ApiRouter } from '../route';
import { deliverPreemptionNotice, requireAnyCluster } from '../use-cases/fleet';
import {
  ClusterIdParams,
  FleetCapacityBody,
  FleetFaultBody,
  FleetPreemptionBody,
  FleetWorkloadBody,
} from '../schemas/clusters';
import { FleetAck } from '../schemas/clusters';

export function addFleetRoutes(router: ApiRouter, deps: ApiDeps) {
  const { db } = deps;
  const fleet = new FleetControls(db);

  const anyCluster = (id: string) => requireAnyCluster(db, id);

  router.add({
    method: 'post',
    path: '/compute/fleet/faults',
    operationId: 'injectFleetFault',
    summary: 'Simulator: make the next boot, acceptance, NCCL or health check of a cluster (or one node) fail',
    tags: ['fleet simulator'],
    access: 'platform-admin',
    strict: true,
    body: FleetFaultBody,
    errors: [403, 404],
    response: { status: 200, description: 'Fault armed', schema: FleetAck },
    handler: async ({ body }) => {
      await anyCluster(body.cluster_id);
      const id = await fleet.injectFault({
        clusterId: body.cluster_id,
        nodeId: body.node_id,
        kind: body.kind,
        count: body.count,
      });
      return {
        ok: true as const,
        simulator: true as const,
        detail: `fault ${id}: ${body.kind} x${body.count} on ${body.node_id ?? `any node of ${body.cluster_id}`}`,
      };
    },
  });

  router.add({
    method: 'put',
    path: '/compute/fleet/capacity',
    operationId: 'setFleetCapacity',
    summary: 'Simulator: how many preemptible nodes a region can hand out (null: no limit)',
    tags: ['fleet simulator'],
    access: 'platform-admin',
    strict: true,
    body: FleetCapacityBody,
    errors: [403],
    response: { status: 200, description: 'Capacity set', schema: FleetAck },
    handler: async ({ body }) => {
      await fleet.setPreemptibleCapacity(body.region, body.gpu_type, body.preemptible_nodes);
      return {
        ok: true as const,
        simulator: true as const,
        detail: `${body.region}/${body.gpu_type}: ${body.preemptible_nodes ?? 'unlimited'} preemptible nodes`,
      };
    },
  });

  router.add({
    method: 'put',
    path: '/compute/fleet/clusters/:cluster_id/workload',
    operationId: 'setFleetWorkload',
    summary: "Simulator: the cluster's pending GPU requests and idle GPUs, as its autoscaler will observe them",
    tags: ['fleet simulator'],
    access: 'platform-admin',
    strict: true,
    params: ClusterIdParams,
    body: FleetWorkloadBody,
    errors: [403, 404],
    response: { status: 200, description: 'Workload set', schema: FleetAck },
    handler: async ({ params, body }) => {
      await anyCluster(params.cluster_id);
      await fleet.setWorkload(params.cluster_id, body);
      return {
        ok: true as const,
        simulator: true as const,
        detail: `pending ${body.pending_gpu_requests}, idle ${body.idle_gpus}`,
      };
    },
  });

  router.add({
    method: 'post',
    path: '/compute/fleet/clusters/:cluster_id/preemption-notices',
    operationId: 'sendPreemptionNotice',
    summary: 'Simulator: the fleet reclaims a preemptible node of the cluster',
    tags: ['fleet simulator'],
    access: 'platform-admin',
    strict: true,
    params: ClusterIdParams,
    body: FleetPreemptionBody,
    errors: [403, 404, 409],
    response: { status: 200, description: 'Notice delivered', schema: FleetAck },
    handler: async ({ params, body }) => {
      const nodeId = await deliverPreemptionNotice(deps, params.cluster_id, body.node_id);
      return { ok: true as const, simulator: true as const, detail: `preemption notice sent for ${nodeId}` };
    },
  });
}
