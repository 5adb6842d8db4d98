import assert from 'node:assert/strict';
import { z } from 'zod';
import { after, before, describe, test } from 'node:test';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('whoami', () => {
  let p: TestPlatform;
  let a: Tenant;
  let b: Tenant;
  before(async () => {
    p = await startTestPlatform();
    a = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
    b = await createTenant(p.db);
  });
  after(() => p.stop());

  test('GET /v1/whoami returns the key, project (with slug) and organization', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/whoami', { key: a.key });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      api_key_id: a.keyId,
      organization_id: a.organizationId,
      organization_name: res.body.organization_name,
      project_id: a.projectId,
      project_name: res.body.project_name,
      project_slug: a.projectSlug,
      user_id: a.userId,
      project_role: 'Admin',
      organization_role: 'Admin',
    });
    assert.match(res.body.organization_name, /^Org /);
  });

  test('GET /whoami (no prefix) answers the same, and each key sees its own project', async () => {
    const root = await call(p.baseUrl, 'GET', '/whoami', { key: b.key });
    assert.equal(root.status, 200);
    assert.equal(root.body.project_id, b.projectId);
    assert.equal(root.body.project_role, 'Editor');
    assert.equal(root.body.organization_role, 'Developer');
    assert.notEqual(root.body.project_id, a.projectId);
  });
});

describe('OpenAPI document', () => {
  let p: TestPlatform;
  before(async () => {
    p = await startTestPlatform();
  });
  after(() => p.stop());

  test('is served without a key and documents the routes from their schemas', async () => {
    const res = await call(p.baseUrl, 'GET', '/v1/openapi.json');
    assert.equal(res.status, 200);
    const doc = res.body;
    assert.equal(doc.openapi, '3.1.0');
    assert.ok(doc.paths['/v1/whoami'].get);
    assert.ok(doc.paths['/whoami'].get);
    const create = doc.paths['/v1/system/self-checks'].post;
    assert.equal(create.operationId, 'createSelfCheck');
    assert.ok(create.requestBody.content['application/json'].schema);
    assert.ok(create.responses['201']);
    assert.ok(create.responses['401']);
    assert.ok(
      doc.paths['/v1/system/self-checks/{id}'].get.parameters.some((x: any) => x.name === 'id' && x.in === 'path'),
    );
    assert.deepEqual(doc.components.securitySchemes.bearerAuth, {
      type: 'http',
      scheme: 'bearer',
      description: doc.components.securitySchemes.bearerAuth.description,
    });
    assert.ok(doc.components.schemas.ErrorResponse);
    // Every route added through the router is documented, the newest included.
    for (const [path, method] of [
      ['/v2/projects/{projectId}/endpoints/{endpointId}/rollouts/{id}/pause', 'post'],
      ['/v2/projects/{projectId}/endpoints/{endpointId}/rollouts/preview-defaults', 'post'],
      ['/v2/projects/{projectId}/configs', 'get'],
      ['/v1/audio/transcriptions', 'post'],
      ['/v1/audio/translations', 'post'],
      ['/v1/models', 'get'],
      ['/v1/admin/endpoint-deployments/{id}/fault-injection', 'put'],
    ])
      assert.ok(doc.paths[path]?.[method], `${method} ${path} documented`);
  });

  test('lists every route the routers registered, each answering with a schema that names its fields', async () => {
    const doc = (await call(p.baseUrl, 'GET', '/v1/openapi.json')).body;
    const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([path, ops]) =>
      Object.keys(ops).map((method) => `${method} ${path}`),
    );
    // What Express dispatches, read from its routers' own tables: a route added without being
    // documented (or documented without being routed) shows here.
    const answered = p.dispatched.map((r) => `${r.method} ${r.path}`);
    assert.ok(answered.length > 100, `${answered.length} routes answered`);
    assert.deepEqual([...documented].sort(), [...answered].sort(), 'the document lists exactly the routes');
    // A response schema that is a bare record (or any/unknown) documents nothing and checks nothing.
    const unconstrained = (s: z.ZodType): boolean => {
      if (s instanceof z.ZodAny || s instanceof z.ZodUnknown) return true;
      if (s instanceof z.ZodRecord)
        return unconstrained(s.valueType as z.ZodType) || s.valueType instanceof z.ZodRecord;
      if (s instanceof z.ZodUnion) return (s.options as z.ZodType[]).some(unconstrained);
      if (s instanceof z.ZodArray) return unconstrained(s.element as z.ZodType);
      if (s instanceof z.ZodObject && s.shape.data instanceof z.ZodArray) return unconstrained(s.shape.data);
      return false;
    };
    const loose = p.routes
      .filter((r) => r.response.mediaType === 'application/json' && unconstrained(r.response.schema))
      .map((r) => `${r.operationId} (${r.method} ${r.path})`);
    assert.deepEqual(loose, []);
  });

  test('has a browsable docs page', async () => {
    const res = await fetch(`${p.baseUrl}/v1/docs/`);
    assert.equal(res.status, 200);
    assert.match(await res.text(), /swagger-ui/i);
  });
});
