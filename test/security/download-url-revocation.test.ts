/**
 * A pre-signed download URL is a credential of the key that asked for it: revoking the key (a
 * leaked key, a person who left) ends its URLs at once, not when they expire an hour later.
 *
 * The attacker holds a key and asks for download URLs of the project's model while the key
 * works; the key is then revoked, and they fetch the URLs they kept.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createApiKey } from '../../db/accounts';
import { storeValidatedRevision } from '../helpers/models';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('download URLs end with their key', () => {
  let p: TestPlatform;
  let t: Tenant;
  let kept: { id: string; secret: string };
  const weights = Buffer.from('pretend safetensors of the project');

  const v2 = (key: string, method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v2/projects/${t.projectId}${path}`, { key, json });
  const planUrl = async (key: string) => {
    const plan = await v2(key, 'POST', '/models/download', { objectId: 'weights' });
    assert.equal(plan.status, 200, JSON.stringify(plan.body));
    return plan.body.files[0].parts[0] as { url: string; headers: Record<string, string> };
  };
  const fetchPart = (part: { url: string; headers: Record<string, string> }) =>
    fetch(part.url, { headers: part.headers });

  before(async () => {
    p = await startTestPlatform({ containers: false });
    t = await createTenant(p.db);
    kept = await createApiKey(p.db, { projectId: t.projectId, userId: t.userId, name: 'kept' });
    const model = await v2(t.key, 'POST', '/models', {
      baseModelId: 'gantry/reference-byte-tiny',
      name: 'weights',
      type: 'model',
    });
    assert.equal(model.status, 200, JSON.stringify(model.body));
    await storeValidatedRevision(p, model.body.id, 'rv_revocation', { 'model.safetensors': weights });
  });
  after(() => p.stop());

  test('a URL from a revoked key answers 403; one from a key that still works serves the file', async () => {
    const fromRevoked = await planUrl(t.key);
    const fromKept = await planUrl(kept.secret);
    assert.equal((await fetchPart(fromRevoked)).status, 206, 'the URL works while its key does');

    const revoked = await call(p.baseUrl, 'DELETE', `/v1/api-keys/${t.keyId}`, { key: t.key });
    assert.equal(revoked.status, 200, JSON.stringify(revoked.body));
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: t.key })).status, 401);

    const after = await fetchPart(fromRevoked);
    assert.equal(after.status, 403, `the revoked key's URL still answered ${after.status}`);
    assert.equal(((await after.json()) as any).error.code, 'download_url_key_revoked');

    const served = await fetchPart(fromKept);
    assert.equal(served.status, 206);
    assert.equal(Buffer.from(await served.arrayBuffer()).toString(), weights.toString());
  });
});
