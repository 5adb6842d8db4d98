/**
 * Endpoint analytics through the official SDK (`client.beta.endpoints.analytics`), over router
 * records and token usage as the gateway writes them: two deployments, one healthy and one whose
 * every request failed, in two hours of a fixed range.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Together } from 'together-ai';
import { insertEndpoint, insertEndpointDeployment } from '../../db/endpoints';
import { ROUTER_LATENCY_BUCKETS_MS } from '../../db/router-stats';
import { recordUsage } from '../../db/usage';
import { PRODUCTS } from '../../shared/pricing';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let client: Together;
const ENDPOINT = 'ep_analytics';
const RANGE = { startTime: '2026-11-24T10:00:00.000Z', endTime: '2026-11-24T12:00:00.000Z' };

/** One second of router records: `requests` requests, all taking `latencyMs`. */
async function routerSecond(deploymentId: string, at: string, requests: number, errors: number, latencyMs: number) {
  const buckets = new Array<number>(ROUTER_LATENCY_BUCKETS_MS.length + 1).fill(0);
  const i = ROUTER_LATENCY_BUCKETS_MS.findIndex((upper) => latencyMs <= upper);
  buckets[i < 0 ? ROUTER_LATENCY_BUCKETS_MS.length : i] = requests;
  await p.db.query(
    `INSERT INTO endpoint_router_stats (deployment_id, second, requests, errors, latency_ms_sum, latency_ms_min,
                                        latency_ms_max, latency_buckets)
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)`,
    [deploymentId, at, requests, errors, requests * latencyMs, latencyMs, buckets],
  );
}

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db);
  await insertEndpoint(p.db, {
    id: ENDPOINT,
    projectId: t.projectId,
    name: 'analytics',
    visibility: 'VISIBILITY_PRIVATE',
  });
  for (const id of ['dep_healthy', 'dep_failing']) {
    await insertEndpointDeployment(p.db, {
      id,
      endpointId: ENDPOINT,
      projectId: t.projectId,
      name: id.replace('dep_', ''),
      model: 'gantry/reference-byte-tiny',
      modelId: 'gantry/reference-byte-tiny',
      autoscaling: {},
      enableLora: false,
      hardware: 'cpu',
    });
  }
  // 10:00: the healthy deployment answers 10 requests in 40 ms, one of them an error.
  await routerSecond('dep_healthy', '2026-11-24T10:00:05Z', 10, 1, 40);
  // 11:30: the failing one answers 5 requests in 1 s, all errors.
  await routerSecond('dep_failing', '2026-11-24T11:30:00Z', 5, 5, 1000);
  // Outside the range: not counted.
  await routerSecond('dep_healthy', '2026-11-24T12:00:00Z', 100, 0, 40);
  for (const [product, quantity] of [
    [PRODUCTS.inputTokens, 900],
    [PRODUCTS.outputTokens, 450],
  ] as const) {
    await recordUsage(p.db, {
      projectId: t.projectId,
      product,
      resourceId: ENDPOINT,
      quantity,
      unit: 'token',
      unitPrice: '0',
      occurredAt: new Date('2026-11-24T10:30:00Z'),
      idempotencyKey: `analytics-test/${product}`,
    });
  }
  const { Together: SDK } = require('together-ai') as typeof import('together-ai');
  client = new SDK({ apiKey: t.key, baseURL: `${p.baseUrl}/v1`, projectID: t.projectId, maxRetries: 0 });
});
after(() => p.stop());

test('an endpoint over two hours: requests, failures, latency, tokens, in hourly buckets and per deployment', async () => {
  const a = await client.beta.endpoints.analytics(ENDPOINT, { ...RANGE, granularity: '1h', includeTimeSeries: true });
  assert.deepEqual(a.timeRange, RANGE);
  const m = a.metrics!;
  assert.deepEqual(m.requestMetrics, {
    totalRequests: '15',
    successfulRequests: '9',
    failedRequests: '6',
    requestsPerSecond: 0.002, // 15 requests in 7,200 s
  });
  assert.equal(m.errorMetrics!.errorRate, 40);
  // Two thirds answered within 50 ms, the slowest in 1 s: the median is in the 25–50 ms bucket.
  assert.ok(m.latencyMetrics!.latencyP50Ms! > 25 && m.latencyMetrics!.latencyP50Ms! <= 50, JSON.stringify(m));
  assert.ok(m.latencyMetrics!.latencyP99Ms! > 500 && m.latencyMetrics!.latencyP99Ms! <= 1000, JSON.stringify(m));
  assert.deepEqual(m.tokenMetrics, {
    totalInputTokens: '900',
    totalOutputTokens: '450',
    avgInputTokens: 100, // per successful request
    avgOutputTokens: 50,
  });
  assert.deepEqual(
    a.timeSeries!.map((b) => [b.timestamp, b.values!.totalRequests, b.values!.failedRequests]),
    [
      ['2026-11-24T10:00:00.000Z', 10, 1],
      ['2026-11-24T11:00:00.000Z', 5, 5],
    ],
  );
  const byDeployment = Object.fromEntries(a.deploymentAnalytics!.map((d) => [d.deploymentId, d.metrics!]));
  assert.equal(byDeployment.dep_healthy.requestMetrics!.totalRequests, '10');
  assert.equal(byDeployment.dep_healthy.latencyMetrics!.latencyP99Ms, 40, 'every request took 40 ms');
  assert.equal(byDeployment.dep_failing.errorMetrics!.errorRate, 100);
  assert.equal(byDeployment.dep_failing.latencyMetrics!.latencyP50Ms, 1000);
});

test('one deployment: its own requests, and no tokens (they are counted per endpoint)', async () => {
  const a = await client.beta.endpoints.analytics(ENDPOINT, { ...RANGE, deploymentId: 'dep_failing' });
  assert.equal(a.metrics!.requestMetrics!.totalRequests, '5');
  assert.equal(a.metrics!.tokenMetrics, undefined);
  assert.equal(a.timeSeries, undefined, 'no time series unless asked');
  assert.deepEqual(
    a.deploymentAnalytics!.map((d) => d.deploymentId),
    ['dep_failing'],
  );
});

test('bad ranges are a 400 naming the parameter; unknown or foreign endpoints are 404', async () => {
  const url = (q: string) => `/v2/projects/${t.projectId}/endpoints/${ENDPOINT}/analytics?${q}`;
  const reversed = await call(p.baseUrl, 'GET', url(`startTime=${RANGE.endTime}&endTime=${RANGE.startTime}`), {
    key: t.key,
  });
  assert.equal(reversed.status, 400);
  assert.equal(reversed.body.error.param, 'startTime');
  const tooFine = await call(
    p.baseUrl,
    'GET',
    url(`startTime=2026-11-01T00:00:00Z&endTime=2026-11-24T00:00:00Z&granularity=1m&includeTimeSeries=true`),
    { key: t.key },
  );
  assert.equal(tooFine.status, 400);
  assert.equal(tooFine.body.error.param, 'granularity');
  const badUnit = await call(p.baseUrl, 'GET', url('granularity=1w'), { key: t.key });
  assert.equal(badUnit.status, 400);
  assert.equal(badUnit.body.error.param, 'granularity');
  assert.equal((await call(p.baseUrl, 'GET', url('deploymentId=dep_nope'), { key: t.key })).status, 404);
  const other = await createTenant(p.db);
  const foreign = await call(p.baseUrl, 'GET', `/v2/projects/${other.projectId}/endpoints/${ENDPOINT}/analytics`, {
    key: other.key,
  });
  assert.equal(foreign.status, 404);
});
