/**
 * The organization's legacy key is shared: everyone who works in the default project may hold
 * it. It must act as the organization's key to its default project, not as the person who
 * regenerated it; otherwise whoever holds it inherits that person's roles (an organization
 * admin's, when an admin regenerated it) and acts in their name.
 *
 * The attacker here is a developer of the organization who holds the shared key; an admin
 * regenerated it.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  addOrganizationMember,
  addProjectMember,
  createApiKey,
  createOrganization,
  createProject,
  createUser,
} from '../../db/accounts';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';

describe('the shared legacy key carries no one’s identity', () => {
  let p: TestPlatform;
  const suffix = randomBytes(3).toString('hex');
  const org = { adminId: '', adminKey: '', adminKeyId: '', developerEmail: `mallory-${suffix}@example.test` };
  let legacyKey = '';

  const api = (key: string, method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v1${path}`, { key, json });

  before(async () => {
    p = await startTestPlatform({ containers: false });
    const orgId = await createOrganization(p.db, `Legacy ${suffix}`);
    const defaultProject = await createProject(p.db, {
      organizationId: orgId,
      name: 'Default',
      slug: `legacy-${suffix}`,
      isDefault: true,
      visibility: 'open',
    });
    org.adminId = await createUser(p.db, { email: `admin-${suffix}@example.test`, name: 'Ada Admin' });
    const developerId = await createUser(p.db, { email: org.developerEmail, name: 'Mallory' });
    await addOrganizationMember(p.db, orgId, org.adminId, 'Admin');
    await addOrganizationMember(p.db, orgId, developerId, 'Developer');
    await addProjectMember(p.db, defaultProject, org.adminId, 'Admin');
    const adminKey = await createApiKey(p.db, { projectId: defaultProject, userId: org.adminId, name: 'ada' });
    org.adminKey = adminKey.secret;
    org.adminKeyId = adminKey.id;

    // The admin regenerates the organization's legacy key and hands it to the team, Mallory included.
    const regenerated = await api(org.adminKey, 'POST', '/api-keys/legacy/regenerate');
    assert.equal(regenerated.status, 201, JSON.stringify(regenerated.body));
    legacyKey = regenerated.body.key;
  });
  after(() => p.stop());

  test('the legacy key is the default project’s key, with no user and no organization role', async () => {
    const listed = (await api(org.adminKey, 'GET', '/api-keys')).body.data.find((k: any) => k.legacy);
    assert.equal(listed.user_id, null, 'the legacy key belongs to no user');
    const me = await api(legacyKey, 'GET', '/whoami');
    assert.equal(me.status, 200, 'the legacy key works for the project');
    assert.equal(me.body.user_id, undefined, JSON.stringify(me.body));
    assert.equal(me.body.organization_role, null);
    assert.equal(me.body.project_role, null);
    assert.equal((await api(legacyKey, 'GET', '/files')).status, 200, 'project work goes on with it');
  });

  test('holding it, a developer cannot make themselves an organization admin', async () => {
    const promoted = await api(legacyKey, 'POST', '/organization/members', {
      email: org.developerEmail,
      role: 'Admin',
    });
    assert.equal(promoted.status, 403, JSON.stringify(promoted.body));
    assert.equal(promoted.body.error.code, 'user_key_required');
    const members = (await api(org.adminKey, 'GET', '/organization/members')).body.data;
    assert.equal(members.find((m: any) => m.email === org.developerEmail).role, 'Developer');
  });

  test('holding it, nobody sees or revokes the admin’s own keys', async () => {
    const keys = await api(legacyKey, 'GET', '/api-keys');
    assert.equal(keys.status, 200);
    assert.deepEqual(
      keys.body.data.map((k: any) => k.legacy),
      [true],
      'only the legacy key itself: ' + JSON.stringify(keys.body),
    );
    const revoked = await api(legacyKey, 'DELETE', `/api-keys/${org.adminKeyId}`);
    assert.equal(revoked.status, 403, JSON.stringify(revoked.body));
    assert.equal((await api(org.adminKey, 'GET', '/whoami')).status, 200, 'the admin’s key still works');
  });

  test('the legacy key cannot regenerate itself (that needs a person of the default project)', async () => {
    const again = await api(legacyKey, 'POST', '/api-keys/legacy/regenerate');
    assert.equal(again.status, 403, JSON.stringify(again.body));
    assert.equal((await api(legacyKey, 'GET', '/whoami')).status, 200, 'and it was not replaced');
  });
});
