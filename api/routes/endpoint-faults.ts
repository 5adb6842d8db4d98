/**
 * Operator fault injection at the inference gateway (admin only), like a
 * service mesh's abort fault: a share of an endpoint deployment's requests is
 * answered with an HTTP error without reaching a replica. It exists for
 * drills: watching a canary rollout pause itself when its target starts
 * failing. The errors count in the gateway's measurements like any other.
 */
import { findEndpointDeploymentById, setFaultInjection } from '../../db/endpoints';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { FaultInjection, FaultInjectionResult } from '../schemas/endpoints';
import { IdParams } from '../schemas/common';

export function addEndpointFaultRoutes(router: ApiRouter, { db }: ApiDeps) {
  const requireDeployment = async (id: string) => {
    const d = await findEndpointDeploymentById(db, id);
    if (!d) throw notFound(`No endpoint deployment '${id}'.`);
    return d;
  };
  router.add({
    method: 'put',
    path: '/admin/endpoint-deployments/:id/fault-injection',
    operationId: 'setEndpointFaultInjection',
    summary: "Operators: answer a share of an endpoint deployment's requests with an error at the gateway (drills)",
    tags: ['operators'],
    access: 'platform-admin',
    strict: true,
    params: IdParams,
    body: FaultInjection,
    errors: [403, 404],
    response: { status: 200, description: 'The fault now in force', schema: FaultInjectionResult },
    handler: async ({ params, body, req }) => {
      const d = await requireDeployment(params.id);
      await setFaultInjection(db, d.id, body);
      req.log?.warn({ deploymentId: d.id, fault: body }, 'gateway fault injection set');
      return { deploymentId: d.id, faultInjection: body };
    },
  });
  router.add({
    method: 'delete',
    path: '/admin/endpoint-deployments/:id/fault-injection',
    operationId: 'clearEndpointFaultInjection',
    summary: "Operators: stop injecting faults into an endpoint deployment's requests",
    tags: ['operators'],
    access: 'platform-admin',
    strict: true,
    params: IdParams,
    errors: [403, 404],
    response: { status: 200, description: 'No fault in force', schema: FaultInjectionResult },
    handler: async ({ params }) => {
      const d = await requireDeployment(params.id);
      await setFaultInjection(db, d.id, null);
      return { deploymentId: d.id, faultInjection: null };
    },
  });
}
