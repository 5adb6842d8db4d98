/**
 * A/B and shadow experiments of an endpoint (`/v2/projects/{p}/endpoints/{id}/abExperiments` and
 * `/shadowExperiments`): listed, as the official Python CLI reads them before it shows, updates or
 * removes an endpoint's deployments. This installation runs no experiments (traffic is split by the
 * endpoint's weights and moved by rollouts), so an existing endpoint's lists are empty; creating one
 * is not a route here.
 */
import { getEndpoint } from '../../db/endpoints';
import type { ApiDeps } from '../deps';
import { notFound } from '../errors';
import type { ApiRouter } from '../route';
import { PageQuery } from '../cursor-pages';
import { EndpointParams, EmptyExperimentList, ListShadowExperimentsQuery } from '../schemas/endpoints';

export function addEndpointExperimentRoutes(router: ApiRouter, { db }: ApiDeps) {
  for (const [path, operationId, what, query] of [
    ['abExperiments', 'listAbExperiments', 'A/B experiments', PageQuery],
    ['shadowExperiments', 'listShadowExperiments', 'shadow experiments', ListShadowExperimentsQuery],
  ] as const) {
    router.add({
      method: 'get',
      path: `/projects/:projectId/endpoints/:id/${path}`,
      projectScope: 'key',
      operationId,
      summary: `An endpoint's ${what} (none run on this installation)`,
      tags: ['endpoints'],
      strict: true,
      params: EndpointParams,
      query,
      errors: [404],
      response: { status: 200, description: `The ${what}: none`, schema: EmptyExperimentList },
      handler: async ({ params, principal }) => {
        if (!(await getEndpoint(db, principal.projectId, params.id)))
          throw notFound(`Endpoint '${params.id}' not found.`);
        return { object: 'list' as const, data: [], next_cursor: null };
      },
    });
  }
}
