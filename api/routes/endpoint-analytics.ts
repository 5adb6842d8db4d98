/**
 * An endpoint's usage and performance analytics (`/v2/projects/{p}/endpoints/{id}/analytics`, the
 * SDK's beta.endpoints.analytics): requests, failures and latency per deployment and in all from
 * the gateway's router records, the endpoint's tokens, optionally in time buckets
 * (api/endpoint-analytics.ts says what is measured and what is left out).
 */
import { getEndpoint, listEndpointDeployments } from '../../db/endpoints';
import { routerSeconds } from '../../db/router-stats';
import { resourceUsageByProduct } from '../../db/usage';
import { PRODUCTS } from '../../shared/pricing';
import type { ApiDeps } from '../deps';
import { granularityMs, routerMetrics, timeRange, timeSeries, tokenMetrics } from '../endpoint-analytics';
import { badRequest, notFound } from '../errors';
import type { ApiRouter } from '../route';
import { EndpointAnalyticsQuery, EndpointAnalyticsSchema, EndpointParams } from '../schemas/endpoints';

const DAY_MS = 86_400_000;
/** The longest range one request may read (the router records of a busy endpoint are one row a second). */
const MAX_RANGE_MS = 31 * DAY_MS;
const MAX_BUCKETS = 1_000;

export function addEndpointAnalyticsRoutes(router: ApiRouter, { db }: ApiDeps) {
  router.add({
    method: 'get',
    path: '/projects/:projectId/endpoints/:id/analytics',
    projectScope: 'key',
    operationId: 'getEndpointAnalytics',
    summary: "An endpoint's requests, failures, latency and tokens over a time range (default the last 24 hours)",
    tags: ['endpoints'],
    params: EndpointParams,
    query: EndpointAnalyticsQuery,
    errors: [404],
    response: { status: 200, description: 'The analytics', schema: EndpointAnalyticsSchema },
    handler: async ({ params, query, principal }) => {
      const e = await getEndpoint(db, principal.projectId, params.id);
      if (!e) throw notFound(`Endpoint '${params.id}' not found.`);
      const toMs = query.endTime ? Date.parse(query.endTime) : Date.now();
      const fromMs = query.startTime ? Date.parse(query.startTime) : toMs - DAY_MS;
      if (fromMs >= toMs) throw badRequest('startTime must be before endTime.', 'startTime');
      if (toMs - fromMs > MAX_RANGE_MS) throw badRequest('The range is at most 31 days.', 'startTime');
      const bucketMs = granularityMs(query.granularity);
      const withSeries = query.includeTimeSeries === 'true';
      if (withSeries && (toMs - fromMs) / bucketMs > MAX_BUCKETS) {
        throw badRequest(`At most ${MAX_BUCKETS} time buckets: choose a coarser granularity.`, 'granularity');
      }
      let deployments = await listEndpointDeployments(db, e.id);
      if (query.deploymentId) {
        deployments = deployments.filter((d) => d.id === query.deploymentId || d.name === query.deploymentId);
        if (!deployments.length) throw notFound(`Endpoint '${e.name}' has no deployment '${query.deploymentId}'.`);
      }
      const range = { fromMs, toMs };
      const measured = await Promise.all(
        deployments.map(async (d) => ({ d, seconds: await routerSeconds(db, d.id, fromMs, toMs) })),
      );
      const all = measured.flatMap((m) => m.seconds);
      const metrics = routerMetrics(all, range);
      // Tokens are counted per endpoint: they belong to the whole, not to one deployment's share.
      const usage = query.deploymentId ? undefined : await resourceUsageByProduct(db, e.id, fromMs, toMs);
      const tokens = usage && {
        input: usage.get(PRODUCTS.inputTokens) ?? 0,
        output: usage.get(PRODUCTS.outputTokens) ?? 0,
      };
      return {
        endpointId: e.id,
        timeRange: timeRange(range),
        metrics: {
          endpointId: e.id,
          ...metrics,
          ...(tokens ? { tokenMetrics: tokenMetrics(tokens, Number(metrics.requestMetrics.successfulRequests)) } : {}),
        },
        ...(withSeries ? { timeSeries: timeSeries(all, range, bucketMs) } : {}),
        deploymentAnalytics: measured.map(({ d, seconds }) => ({
          deploymentId: d.id,
          endpointId: e.id,
          timeRange: timeRange(range),
          metrics: { endpointId: e.id, deploymentId: d.id, ...routerMetrics(seconds, range) },
          ...(withSeries ? { timeSeries: timeSeries(seconds, range, bucketMs) } : {}),
        })),
      };
    },
  });
}
