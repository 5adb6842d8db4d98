/**
 * The official SDK's beta.endpoints against Gantry, changing nothing but
 * baseURL, apiKey and projectID (the SDK's own option for its project-scoped
 * paths): endpoints list (by pages), retrieve, update and delete with etags;
 * deployments retrieve, update and delete; the endpoint's events with their
 * filters; LoRA adapters (a real fine-tune's adapter) attached, listed, read,
 * moved and detached by etag, and called through the gateway with the SDK's
 * chat.completions; and the retired v1 `client.endpoints` resource.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import type { Endpoint, EndpointDeployment, EndpointListEventsResponse } from 'together-ai/resources/beta/endpoints';
import type { AdapterRetrieveResponse } from 'together-ai/resources/beta/endpoints/adapters';
import { chat, jsonl } from '../helpers/datasets';
import { eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { storeValidatedRevision } from '../helpers/models';
import { createTenant, type Tenant } from '../helpers/tenants';

const BASE = 'gantry/reference-byte-tiny';
const DEPLOYMENT_STATES = [
  'DEPLOYMENT_STATE_PROVISIONING',
  'DEPLOYMENT_STATE_READY',
  'DEPLOYMENT_STATE_SCALING',
  'DEPLOYMENT_STATE_DEGRADED',
  'DEPLOYMENT_STATE_FAILED',
  'DEPLOYMENT_STATE_STOPPED',
  'DEPLOYMENT_STATE_STOPPING',
] as const satisfies ReadonlyArray<EndpointDeployment['status']['state']>;
const ADAPTER_STATES = [
  'ADAPTER_LOAD_STATE_PENDING',
  'ADAPTER_LOAD_STATE_LOADING',
  'ADAPTER_LOAD_STATE_READY',
  'ADAPTER_LOAD_STATE_REMOVING',
  'ADAPTER_LOAD_STATE_FAILED',
] as const satisfies ReadonlyArray<AdapterRetrieveResponse.PerCluster['state']>;

const isIsoDate = (s: unknown) => typeof s === 'string' && !Number.isNaN(Date.parse(s));
const status = (code: number) => (err: { status?: number }) => err.status === code;
async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of pages) out.push(x);
  return out;
}

/** The fields the SDK's Endpoint requires. */
function assertEndpoint(e: Endpoint, tenant: Tenant) {
  assert.match(e.id, /^ep_/);
  assert.equal(e.projectId, tenant.projectId);
  assert.equal(e.endpointType, 'ENDPOINT_TYPE_DEDICATED');
  assert.ok(['VISIBILITY_PRIVATE', 'VISIBILITY_INTERNAL'].includes(e.visibility));
  assert.equal(typeof e.etag, 'string');
  assert.ok(e.etag.length > 0);
  assert.ok(Array.isArray(e.deployments) && Array.isArray(e.trafficSplit));
  assert.ok(isIsoDate(e.createdAt) && isIsoDate(e.updatedAt));
  for (const d of e.deployments) {
    assert.ok((DEPLOYMENT_STATES as readonly string[]).includes(d.state), d.state);
    assert.equal(typeof d.estimatedEffectiveTrafficShare, 'number');
    assert.equal(d.trafficMode, 'TRAFFIC_MODE_LIVE');
    assert.ok(isIsoDate(d.createdAt));
  }
}

/** The fields the SDK's EndpointDeployment requires. */
function assertDeployment(d: EndpointDeployment, tenant: Tenant, endpointId: string) {
  assert.match(d.id, /^dep_/);
  assert.equal(d.endpointId, endpointId);
  assert.equal(d.projectId, tenant.projectId);
  for (const k of ['config', 'configId', 'etag', 'hardware', 'model', 'modelId', 'modelRevisionId', 'name'] as const)
    assert.equal(typeof d[k], 'string', k);
  assert.equal(typeof d.status.message, 'string');
  assert.ok((DEPLOYMENT_STATES as readonly string[]).includes(d.status.state), d.status.state);
  assert.equal(d.trafficMode, 'TRAFFIC_MODE_LIVE');
  assert.ok(isIsoDate(d.createdAt) && isIsoDate(d.updatedAt));
  assert.equal(typeof d.autoscaling, 'object');
}

/** The fields the SDK's adapter responses require. */
function assertAdapter(a: AdapterRetrieveResponse, adapterModelId: string) {
  assert.equal(a.adapterModelId, adapterModelId);
  assert.match(a.desiredRevisionId, /^rv_/);
  assert.equal(typeof a.etag, 'string');
  assert.equal(a.perCluster.length, 1);
  const [c] = a.perCluster;
  assert.equal(c.adapterModelId, adapterModelId);
  assert.equal(typeof c.clusterId, 'string');
  assert.ok((ADAPTER_STATES as readonly string[]).includes(c.state), c.state);
  for (const k of ['readyPodCount', 'failedPodCount', 'totalPodCount'] as const) assert.equal(typeof c[k], 'number');
}

function assertEvent(e: EndpointListEventsResponse, endpointId: string) {
  assert.equal(typeof e.id, 'string');
  assert.equal(e.endpointId, endpointId);
  assert.ok(isIsoDate(e.createdAt));
  assert.ok(['LEVEL_DEBUG', 'LEVEL_INFO', 'LEVEL_WARN', 'LEVEL_ERROR'].includes(e.level), e.level);
  assert.ok(['SOURCE_KIND_ENDPOINT', 'SOURCE_KIND_DEPLOYMENT'].includes(e.sourceKind), e.sourceKind);
  assert.equal(e.source, e.deploymentId ?? e.endpointId);
  assert.equal(typeof e.type, 'string');
}

describe('official SDK: beta.endpoints (endpoints, deployments, events, adapters) and the retired v1 endpoints', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;
  /** The adapter of a LoRA fine-tune, trained while the deployment comes up. */
  let adapter: Promise<{ id: string; revisionId: string }>;
  const ids = { endpoint: '', deployment: '' };

  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_ADAPTER_RESYNC_SECONDS: '1', GANTRY_ADAPTERS_PER_DEPLOYMENT: '1' } });
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, projectID: tenant.projectId, maxRetries: 0 });
    adapter = (async () => {
      const records = Array.from({ length: 32 }, (_, i) => chat(`ping ${i}`, 'pong!'));
      const file = await uploadValidated(p, tenant.key, 'ping.jsonl', jsonl(...records));
      const job = await client.fineTuning.create({
        model: BASE,
        training_file: file,
        n_epochs: 1,
        batch_size: 8,
        learning_rate: 0.01,
        max_seq_length: 32,
        training_type: { type: 'Lora', lora_r: 4, lora_alpha: 8 },
      });
      const done = await eventually(
        () => client.fineTuning.retrieve(job.id),
        (j) => ['completed', 'error', 'cancelled'].includes(j.status),
        90_000,
      );
      assert.equal(done.status, 'completed');
      return { id: done.adapter_object_id!, revisionId: done.adapter_object_revision_id! };
    })();
    adapter.catch(() => undefined); // awaited, and its failure reported, by the adapter test
  });
  after(() => p.stop());

  test('endpoints: create, list by pages, retrieve by id and name, update and delete by etag', async () => {
    const a = await client.beta.endpoints.create({ name: 'sdk-a' });
    assertEndpoint(a, tenant);
    assert.equal(a.name, 'sdk-a');
    assert.equal(a.visibility, 'VISIBILITY_PRIVATE');
    ids.endpoint = a.id;
    const b = await client.beta.endpoints.create({ name: 'sdk-b', visibility: 'VISIBILITY_INTERNAL' });
    const c = await client.beta.endpoints.create({ name: 'sdk-c' });
    await assert.rejects(client.beta.endpoints.create({ name: 'sdk-c' }), status(409));
    await assert.rejects(client.beta.endpoints.create({ name: 'Not A Name' }), status(400));

    // The SDK follows next_cursor, one endpoint a page.
    const listed = await all(client.beta.endpoints.list({ limit: 1 }));
    listed.forEach((e) => assertEndpoint(e, tenant));
    assert.deepEqual(
      listed.map((e) => e.name),
      ['sdk-c', 'sdk-b', 'sdk-a'],
      'newest first',
    );
    const firstPage = await client.beta.endpoints.list({ limit: 2 });
    assert.equal(firstPage.data.length, 2);
    assert.ok(firstPage.hasNextPage());

    assert.equal((await client.beta.endpoints.retrieve(b.id)).name, 'sdk-b');
    assert.equal((await client.beta.endpoints.retrieve('sdk-b')).id, b.id, 'by name');

    const renamed = await client.beta.endpoints.update(b.id, {
      name: 'sdk-b2',
      visibility: 'VISIBILITY_PRIVATE',
      etag: b.etag,
    });
    assertEndpoint(renamed, tenant);
    assert.equal(renamed.name, 'sdk-b2');
    assert.equal(renamed.visibility, 'VISIBILITY_PRIVATE');
    assert.notEqual(renamed.etag, b.etag);
    await assert.rejects(client.beta.endpoints.update(b.id, { name: 'sdk-b3', etag: b.etag }), status(409));
    await assert.rejects(client.beta.endpoints.update(b.id, { name: 'sdk-a' }), status(409), 'name taken');
    // The management API refuses unknown fields by name.
    await assert.rejects(
      client.beta.endpoints.update(b.id, { nmae: 'typo' } as never),
      (err: { status?: number; error?: { error?: { param?: string } } }) =>
        err.status === 400 && err.error?.error?.param === 'nmae',
    );

    // updateMask selects what an update changes: the visibility here, not the name sent beside it.
    const masked = await client.beta.endpoints.update(b.id, {
      updateMask: 'visibility',
      visibility: 'VISIBILITY_INTERNAL',
      name: 'not-applied',
      etag: renamed.etag,
    });
    assert.deepEqual([masked.name, masked.visibility], ['sdk-b2', 'VISIBILITY_INTERNAL']);
    await assert.rejects(
      client.beta.endpoints.update(b.id, { updateMask: 'projectId', name: 'x' }),
      (err: { status?: number; error?: { error?: { param?: string } } }) =>
        err.status === 400 && err.error?.error?.param === 'updateMask',
    );

    await assert.rejects(client.beta.endpoints.delete(b.id, { etag: b.etag }), status(409), 'stale etag');
    assert.deepEqual(await client.beta.endpoints.delete(b.id, { etag: masked.etag }), {});
    await assert.rejects(client.beta.endpoints.retrieve(b.id), status(404));
    assert.deepEqual(await client.beta.endpoints.delete(c.id), {});
  });

  test('deployments: validateOnly, create with LoRA enabled, retrieve, list, update by etag and mask', async () => {
    const dryRun = await client.beta.endpoints.deployments.create(ids.endpoint, {
      name: 'base',
      modelId: BASE,
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
      validateOnly: true,
    });
    assertDeployment({ ...dryRun, id: 'dep_not-created' }, tenant, ids.endpoint);
    assert.equal(dryRun.id, '', 'nothing was created');
    assert.equal(dryRun.configId, 'cr_reference-byte-tiny-fp32');
    assert.match(dryRun.status.message, /validateOnly/);
    assert.deepEqual(await all(client.beta.endpoints.deployments.list(ids.endpoint)), []);

    const created = await client.beta.endpoints.deployments.create(ids.endpoint, {
      name: 'base',
      modelId: BASE,
      enableLora: true,
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
    });
    assertDeployment(created, tenant, ids.endpoint);
    ids.deployment = created.id;
    const ready = await eventually(
      () => client.beta.endpoints.deployments.retrieve(created.id, { endpointId: ids.endpoint }),
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
      60_000,
    );
    assertDeployment(ready, tenant, ids.endpoint);
    assert.equal(ready.modelId, BASE);
    assert.equal(ready.enableLora, true);
    assert.equal(ready.configId, 'cr_reference-byte-tiny-fp32');
    assert.equal(ready.estimatedEffectiveTrafficShare, 1);
    assert.deepEqual(ready.autoscaling, { minReplicas: 1, maxReplicas: 1 });
    assert.equal(
      (await client.beta.endpoints.deployments.retrieve('base', { endpointId: 'sdk-a' })).id,
      created.id,
      'by names',
    );
    const listed = await all(client.beta.endpoints.deployments.list(ids.endpoint));
    assert.deepEqual(
      listed.map((d) => d.id),
      [created.id],
    );
    const endpoint = await client.beta.endpoints.retrieve(ids.endpoint);
    assert.deepEqual(
      endpoint.deployments.map((d) => [d.id, d.state, d.readyReplicas]),
      [[created.id, 'DEPLOYMENT_STATE_READY', 1]],
    );

    const updated = await client.beta.endpoints.deployments.update(created.id, {
      endpointId: ids.endpoint,
      autoscaling: { minReplicas: 1, maxReplicas: 2 },
      etag: ready.etag,
    });
    assertDeployment(updated, tenant, ids.endpoint);
    assert.deepEqual(updated.autoscaling, { minReplicas: 1, maxReplicas: 2 });
    assert.notEqual(updated.etag, ready.etag);
    await assert.rejects(
      client.beta.endpoints.deployments.update(created.id, {
        endpointId: ids.endpoint,
        autoscaling: { minReplicas: 1, maxReplicas: 1 },
        etag: ready.etag,
      }),
      status(409),
    );
    const masked = await client.beta.endpoints.deployments.update(created.id, {
      endpointId: ids.endpoint,
      updateMask: 'name',
      name: 'base',
      autoscaling: { minReplicas: 0, maxReplicas: 0 },
    });
    assert.deepEqual(masked.autoscaling, { minReplicas: 1, maxReplicas: 2 }, 'autoscaling is outside the mask');
    await assert.rejects(client.beta.endpoints.deployments.retrieve('nope', { endpointId: ids.endpoint }), status(404));
  });

  test("adapters: a fine-tune's adapter attached, listed, loaded, called, moved and detached by etag", async () => {
    const { id: adapterId, revisionId } = await adapter;
    const where = { endpointId: ids.endpoint, deploymentId: ids.deployment };
    const adapters = client.beta.endpoints.adapters;
    const created = await adapters.create({ ...where, adapterModelId: adapterId });
    assertAdapter(created, adapterId);
    assert.equal(created.desiredRevisionId, revisionId);
    assert.equal(created.perCluster[0].state, 'ADAPTER_LOAD_STATE_PENDING');
    await assert.rejects(adapters.create({ ...where, adapterModelId: adapterId }), status(409));

    const loaded = await eventually(
      () => adapters.retrieve(adapterId, where),
      (a) => a.perCluster[0].state === 'ADAPTER_LOAD_STATE_READY',
      30_000,
    );
    assertAdapter(loaded, adapterId);
    const [c] = loaded.perCluster;
    assert.deepEqual([c.readyPodCount, c.failedPodCount, c.totalPodCount], [1, 0, 1]);
    assert.equal(c.realizedRevisionId, revisionId);
    assert.equal(c.realizedEtag, loaded.etag);
    assert.ok(isIsoDate(c.loadedAt) && isIsoDate(c.updatedAt));

    const listed = await all(adapters.list(ids.endpoint, ids.deployment, { limit: 1 }));
    assert.deepEqual(
      listed.map((a) => a.adapterModelId),
      [adapterId],
    );
    listed.forEach((a) => assertAdapter(a, adapterId));

    // The SDK's chat.completions at the gateway, with and without the adapter.
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    const inference = new SDK({ apiKey: tenant.key, baseURL: `${p.gatewayUrl}/v1`, maxRetries: 0 });
    const ask = (model: string) =>
      inference.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'ping 7' }],
        max_tokens: 8,
        temperature: 0,
      });
    const tuned = await ask(`${tenant.projectSlug}/sdk-a:${adapterId}`);
    assert.equal(tuned.object, 'chat.completion');
    assert.equal(typeof tuned.choices[0].message?.content, 'string');
    assert.ok(tuned.usage && tuned.usage.completion_tokens > 0);
    const plain = await ask(`${tenant.projectSlug}/sdk-a`);
    assert.equal(typeof plain.choices[0].message?.content, 'string');

    const moved = await adapters.update(adapterId, { ...where, adapterRevisionId: revisionId, etag: loaded.etag });
    assertAdapter(moved, adapterId);
    assert.notEqual(moved.etag, loaded.etag);
    await assert.rejects(
      adapters.update(adapterId, { ...where, adapterRevisionId: revisionId, etag: loaded.etag }),
      status(409),
      'stale etag',
    );
    await assert.rejects(adapters.delete(adapterId, { ...where, etag: loaded.etag }), status(409), 'stale etag');
    assert.deepEqual(await adapters.delete(adapterId, { ...where, etag: moved.etag }), {});
    await eventually(
      () =>
        adapters.retrieve(adapterId, where).then(
          () => 200,
          (err: { status?: number }) => err.status,
        ),
      (s) => s === 404,
      30_000,
    );
  });

  test('at adapter capacity (1 here) another adapter needs force, which evicts the oldest', async () => {
    const { id: adapterId } = await adapter;
    const where = { endpointId: ids.endpoint, deploymentId: ids.deployment };
    const adapters = client.beta.endpoints.adapters;
    // The test before detached this adapter: until its workflow has unloaded it, attaching it again
    // is a 409 adapter_removing.
    await eventually(
      () =>
        adapters.create({ ...where, adapterModelId: adapterId }).then(
          () => 'attached',
          (err: any) => {
            if (err?.status === 409 && JSON.stringify(err.error ?? {}).includes('adapter_removing')) return 'removing';
            throw err;
          },
        ),
      (r) => r === 'attached',
      30_000,
    );
    // A second adapter (of another base: attached, never loaded) with a stored revision.
    const other = await client.beta.models.create({
      baseModelId: 'Qwen/Qwen3-8B',
      name: 'other-adapter',
      type: 'adapter',
    });
    await storeValidatedRevision(p, other.id, 'rv_other', { 'adapter.safetensors': Buffer.from('weights') });
    await assert.rejects(adapters.create({ ...where, adapterModelId: other.id }), status(409), 'at capacity');
    const forced = await adapters.create({ ...where, adapterModelId: other.id, force: true });
    assert.equal(forced.adapterModelId, other.id);
    const left = await eventually(
      () => all(adapters.list(ids.endpoint, ids.deployment)),
      (list) => list.length === 1,
      30_000,
    );
    assert.deepEqual(
      left.map((a) => a.adapterModelId),
      [other.id],
      'the oldest was evicted',
    );
    const current = await adapters.retrieve(other.id, where);
    assert.deepEqual(await adapters.delete(other.id, { ...where, etag: current.etag }), {});
  });

  test('listEvents: every event in the SDK shape, by pages, filtered', async () => {
    const events = await all(client.beta.endpoints.listEvents(ids.endpoint, { limit: 2 }));
    events.forEach((e) => assertEvent(e, ids.endpoint));
    const types = events.map((e) => e.type);
    for (const t of ['endpoint.created', 'deployment.created', 'deployment.ready'])
      assert.ok(types.includes(t), `${t} in ${types.join(', ')}`);
    assert.equal(new Set(events.map((e) => e.id)).size, events.length, 'no event twice across pages');

    const ofDeployment = await all(client.beta.endpoints.listEvents(ids.endpoint, { deploymentIds: [ids.deployment] }));
    assert.ok(ofDeployment.length > 0);
    assert.ok(
      ofDeployment.every((e) => e.deploymentId === ids.deployment && e.sourceKind === 'SOURCE_KIND_DEPLOYMENT'),
    );
    const ready = await all(client.beta.endpoints.listEvents(ids.endpoint, { types: ['deployment.ready'] }));
    assert.ok(ready.length >= 1 && ready.every((e) => e.type === 'deployment.ready'));
    const ofEndpoint = await all(
      client.beta.endpoints.listEvents(ids.endpoint, { sourceKinds: ['SOURCE_KIND_ENDPOINT'] }),
    );
    assert.deepEqual(
      ofEndpoint.map((e) => e.type),
      types.filter((_, i) => events[i].sourceKind === 'SOURCE_KIND_ENDPOINT'),
    );
    assert.ok(ofEndpoint.some((e) => e.type === 'endpoint.created'));
    const warnings = await all(client.beta.endpoints.listEvents(ids.endpoint, { minLevel: 'LEVEL_WARN' }));
    assert.deepEqual(
      warnings.map((e) => e.id),
      events.filter((e) => e.level === 'LEVEL_WARN' || e.level === 'LEVEL_ERROR').map((e) => e.id),
    );
    assert.ok(warnings.length < events.length, 'the INFO events are left out');
    const future = new Date(Date.now() + 60_000).toISOString();
    assert.deepEqual(await all(client.beta.endpoints.listEvents(ids.endpoint, { since: future })), []);
    assert.equal((await all(client.beta.endpoints.listEvents(ids.endpoint, { until: future }))).length, events.length);
  });

  test('deployments delete (by etag), then the endpoint', async () => {
    const current = await client.beta.endpoints.deployments.retrieve(ids.deployment, { endpointId: ids.endpoint });
    await assert.rejects(client.beta.endpoints.delete(ids.endpoint), status(409), 'it still has a deployment');
    await assert.rejects(
      client.beta.endpoints.deployments.delete(ids.deployment, { endpointId: ids.endpoint, etag: 'stale' }),
      status(409),
    );
    assert.deepEqual(
      await client.beta.endpoints.deployments.delete(ids.deployment, { endpointId: ids.endpoint, etag: current.etag }),
      {},
    );
    await eventually(
      () =>
        client.beta.endpoints.deployments.retrieve(ids.deployment, { endpointId: ids.endpoint }).then(
          () => 200,
          (err: { status?: number }) => err.status,
        ),
      (s) => s === 404,
      30_000,
    );
    const types = (await all(client.beta.endpoints.listEvents(ids.endpoint))).map((e) => e.type);
    assert.ok(types.includes('deployment.stopping') && types.includes('deployment.deleted'), types.join(', '));
    assert.deepEqual(await client.beta.endpoints.delete(ids.endpoint), {});
    assert.deepEqual(await all(client.beta.endpoints.list()), []);
  });

  test('the retired v1 endpoints resource: create is 403 endpoints_v1_create_access_disabled', async () => {
    const endpoint = await client.beta.endpoints.create({ name: 'v1-check' });
    await assert.rejects(
      client.endpoints.create({
        model: BASE,
        hardware: '1x_nvidia_h100_80gb_sxm',
        autoscaling: { min_replicas: 1, max_replicas: 1 },
      }),
      (err: { status?: number; error?: { error?: { code?: string; type?: string; message?: string } } }) =>
        err.status === 403 && err.error?.error?.code === 'endpoints_v1_create_access_disabled',
    );
    // The rest of the v1 resource is not part of the spec; Gantry has no such routes (the v2 API replaces
    // them): each is a 404 that names the route, never a 500 or a made-up answer.
    const v1: Array<() => Promise<unknown>> = [
      () => client.endpoints.list(),
      () => client.endpoints.retrieve(endpoint.id),
      () => client.endpoints.update(endpoint.id, { display_name: 'x' }),
      () => client.endpoints.delete(endpoint.id),
      () => client.endpoints.listHardware(),
      () => client.endpoints.listAvzones(),
      () => client.endpoints.adapters.list(endpoint.id),
      () => client.endpoints.adapters.add(endpoint.id, { model_id: 'ml_x' }),
      () => client.endpoints.adapters.remove(endpoint.id, { model_id: 'ml_x' }),
    ];
    for (const call of v1) {
      await assert.rejects(
        call(),
        (err: { status?: number; error?: { error?: { code?: string } } }) =>
          err.status === 404 && err.error?.error?.code === 'route_not_found',
      );
    }
    assert.equal((await client.beta.endpoints.retrieve(endpoint.id)).name, 'v1-check', 'v1 delete changed nothing');
  });
});
