/**
 * Projects, members and API keys through the API, with the spec's rules:
 * roles, visibility, the leave rules, legacy key regeneration, and a revoked
 * key refused at once.
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
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant } from '../helpers/tenants';

describe('project, member and API-key administration', () => {
  let p: TestPlatform;
  const org = { id: '', defaultProject: '', adminKey: '', adminId: '', devKey: '', devId: '', legacyKey: '' };
  const suffix = randomBytes(3).toString('hex');

  const api = (key: string, method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v1${path}`, { key, json });

  before(async () => {
    p = await startTestPlatform();
    // An organization as an installation would have it: a default project every member belongs to,
    // an organization admin who administers it, and a developer who is not an explicit member of it.
    org.id = await createOrganization(p.db, `Admin test ${suffix}`);
    org.defaultProject = await createProject(p.db, {
      organizationId: org.id,
      name: 'Default',
      slug: `default-${suffix}`,
      isDefault: true,
      visibility: 'open',
    });
    org.adminId = await createUser(p.db, { email: `admin-${suffix}@example.test`, name: 'Ada Admin' });
    org.devId = await createUser(p.db, { email: `dev-${suffix}@example.test`, name: 'Dev Eloper' });
    await addOrganizationMember(p.db, org.id, org.adminId, 'Admin');
    await addOrganizationMember(p.db, org.id, org.devId, 'Developer');
    await addProjectMember(p.db, org.defaultProject, org.adminId, 'Admin');
    org.adminKey = (await createApiKey(p.db, { projectId: org.defaultProject, userId: org.adminId, name: 'a' })).secret;
    org.devKey = (await createApiKey(p.db, { projectId: org.defaultProject, userId: org.devId, name: 'd' })).secret;
    org.legacyKey = (
      await createApiKey(p.db, { projectId: org.defaultProject, userId: null, name: 'legacy', legacy: true })
    ).secret;
  });
  after(() => p.stop());

  test('a developer creates a project and is its admin; slugs are unique and checked', async () => {
    const created = await api(org.devKey, 'POST', '/projects', {
      name: 'Research',
      slug: `research-${suffix}`,
      visibility: 'closed',
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.role, 'Admin');
    assert.equal(created.body.visibility, 'closed');
    assert.equal(created.body.is_default, false);

    const again = await api(org.adminKey, 'POST', '/projects', { name: 'Other', slug: `research-${suffix}` });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'project_slug_taken');
    const bad = await api(org.adminKey, 'POST', '/projects', { name: 'Bad', slug: 'Not A Slug' });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, 'slug');

    const listed = await api(org.adminKey, 'GET', '/projects');
    const slugs = listed.body.data.map((x: any) => x.slug);
    assert.deepEqual(slugs, [`default-${suffix}`, `research-${suffix}`]); // default first
    assert.equal(listed.body.data[1].role, null, 'the org admin sees it without being a member');
  });

  test('private projects are invisible to non-members; open ones can be joined, closed ones cannot', async () => {
    const make = async (slug: string, visibility: string) =>
      (await api(org.adminKey, 'POST', '/projects', { name: slug, slug: `${slug}-${suffix}`, visibility })).body.id;
    const secret = await make('secret', 'private');
    const open = await make('open', 'open');
    const closed = await make('closed', 'closed');

    assert.equal((await api(org.devKey, 'GET', `/projects/${secret}`)).status, 404);
    const devSees = (await api(org.devKey, 'GET', '/projects')).body.data.map((x: any) => x.id);
    assert.ok(!devSees.includes(secret) && devSees.includes(open) && devSees.includes(closed));

    const joinClosed = await api(org.devKey, 'POST', `/projects/${closed}/join`);
    assert.equal(joinClosed.status, 403);
    assert.equal(joinClosed.body.error.code, 'project_not_open');
    const joinOpen = await api(org.devKey, 'POST', `/projects/${open}/join`);
    assert.equal(joinOpen.status, 200);
    assert.equal(joinOpen.body.role, 'Editor');
    assert.equal((await api(org.devKey, 'GET', `/projects/${open}`)).body.role, 'Editor');

    // An editor cannot manage members or settings.
    const promote = await api(org.devKey, 'POST', `/projects/${open}/members`, { user_id: org.devId, role: 'Admin' });
    assert.equal(promote.status, 403);
    assert.equal((await api(org.devKey, 'PATCH', `/projects/${open}`, { visibility: 'private' })).status, 403);
  });

  test('leave rules: non-members cannot leave the default project; the last admin cannot leave', async () => {
    const nonMember = await api(org.devKey, 'POST', `/projects/${org.defaultProject}/leave`);
    assert.equal(nonMember.status, 409);
    assert.equal(nonMember.body.error.code, 'not_a_member_of_default_project');

    const project = (await api(org.devKey, 'POST', '/projects', { name: 'Solo', slug: `solo-${suffix}` })).body.id;
    const lastAdmin = await api(org.devKey, 'POST', `/projects/${project}/leave`);
    assert.equal(lastAdmin.status, 409);
    assert.equal(lastAdmin.body.error.code, 'last_project_admin');
    const demote = await api(org.devKey, 'POST', `/projects/${project}/members`, {
      user_id: org.devId,
      role: 'Editor',
    });
    assert.equal(demote.status, 409);

    // With a second admin, the first may leave; the membership list says who remains.
    const added = await api(org.devKey, 'POST', `/projects/${project}/members`, {
      email: `admin-${suffix}@example.test`,
      role: 'Admin',
    });
    assert.equal(added.status, 200, JSON.stringify(added.body));
    assert.equal(added.body.user_id, org.adminId);
    assert.equal((await api(org.devKey, 'POST', `/projects/${project}/leave`)).status, 200);
    const members = (await api(org.adminKey, 'GET', `/projects/${project}/members`)).body.data;
    assert.deepEqual(
      members.map((m: any) => [m.user_id, m.role]),
      [[org.adminId, 'Admin']],
    );
    assert.equal((await api(org.devKey, 'GET', `/projects/${project}`)).status, 404, 'private, and no longer a member');

    const stranger = await api(org.adminKey, 'POST', `/projects/${project}/members`, {
      email: 'nobody@example.test',
      role: 'Editor',
    });
    assert.equal(stranger.status, 404);
    assert.equal(stranger.body.error.code, 'user_not_found');
  });

  test('keys: created with the secret shown once, listed without it, revoked and refused at once', async () => {
    const made = await api(org.devKey, 'POST', '/api-keys', { name: 'ci' });
    assert.equal(made.status, 201);
    assert.match(made.body.key, /^gantry_/);
    assert.equal(made.body.key_hint, made.body.key.slice(-4));
    assert.equal(made.body.project_id, org.defaultProject, 'in the calling key’s project by default');
    const whoami = await call(p.baseUrl, 'GET', '/v1/whoami', { key: made.body.key });
    assert.equal(whoami.status, 200);
    assert.equal(whoami.body.api_key_id, made.body.id);
    assert.equal(whoami.body.user_id, org.devId);

    // A developer sees their own keys; the project's admin sees everyone's. No secret is ever listed.
    const own = (await api(org.devKey, 'GET', '/api-keys')).body.data;
    assert.ok(own.every((k: any) => k.user_id === org.devId && !('key' in k)));
    const all = (await api(org.adminKey, 'GET', '/api-keys')).body.data;
    assert.ok(all.some((k: any) => k.user_id === org.adminId) && all.some((k: any) => k.id === made.body.id));

    // Keys of a project the caller does not belong to are refused.
    const closed = (
      await api(org.adminKey, 'POST', '/projects', { name: 'C', slug: `keys-${suffix}`, visibility: 'closed' })
    ).body.id;
    const notMember = await api(org.devKey, 'POST', '/api-keys', { name: 'x', project_id: closed });
    assert.equal(notMember.status, 403);

    // The admin revokes the developer's key; the very next request with it is a 401.
    const revoked = await api(org.adminKey, 'DELETE', `/api-keys/${made.body.id}`);
    assert.equal(revoked.status, 200);
    assert.ok(revoked.body.revoked_at);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: made.body.key })).status, 401);

    // Another organization's admin cannot see or revoke this organization's keys.
    const outsider = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
    const adminKeyId = all.find((k: any) => k.user_id === org.adminId && !k.legacy).id;
    assert.equal((await api(outsider.key, 'DELETE', `/api-keys/${adminKeyId}`)).status, 404);
    assert.equal((await api(outsider.key, 'GET', `/projects/${org.defaultProject}`)).status, 404);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: org.adminKey })).status, 200);
  });

  test('a member removed from a project loses its keys there at once; a key needs a current membership', async () => {
    const shared = (
      await api(org.adminKey, 'POST', '/projects', { name: 'Shared', slug: `shared-${suffix}`, visibility: 'closed' })
    ).body.id;
    const joined = await api(org.adminKey, 'POST', `/projects/${shared}/members`, {
      user_id: org.devId,
      role: 'Editor',
    });
    assert.equal(joined.status, 200, JSON.stringify(joined.body));
    const devShared = await api(org.devKey, 'POST', '/api-keys', { name: 'shared', project_id: shared });
    assert.equal(devShared.status, 201);
    const whoami = (key: string) => call(p.baseUrl, 'GET', '/v1/whoami', { key });
    assert.equal((await whoami(devShared.body.key)).status, 200);

    // Removed by the project's admin: the very next request with the key is a 401, and the key
    // is revoked. Their key of the default project (where they still belong) works.
    assert.equal((await api(org.adminKey, 'DELETE', `/projects/${shared}/members/${org.devId}`)).status, 200);
    assert.equal((await whoami(devShared.body.key)).status, 401);
    const { rows } = await p.db.query('SELECT revoked_at FROM api_keys WHERE id = $1', [devShared.body.id]);
    assert.ok(rows[0].revoked_at, 'revoked with the membership');
    assert.equal((await whoami(org.devKey)).status, 200);

    // However a membership ends (here, its row removed directly), the key stops with it.
    await api(org.adminKey, 'POST', `/projects/${shared}/members`, { user_id: org.devId, role: 'Editor' });
    const again = await api(org.devKey, 'POST', '/api-keys', { name: 'shared-2', project_id: shared });
    assert.equal((await whoami(again.body.key)).status, 200);
    await p.db.query('DELETE FROM project_members WHERE project_id = $1 AND user_id = $2', [shared, org.devId]);
    const refused = await eventually(
      () => whoami(again.body.key),
      (r) => r.status !== 200,
      5_000,
    );
    assert.equal(refused.status, 401);
  });

  test('the legacy key is regenerated by an admin or editor of the default project only', async () => {
    const refused = await api(org.devKey, 'POST', '/api-keys/legacy/regenerate');
    assert.equal(refused.status, 403, 'an organization developer who is not in the default project');
    assert.equal(refused.body.error.code, 'default_project_role_required');
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: org.legacyKey })).status, 200);

    const fresh = await api(org.adminKey, 'POST', '/api-keys/legacy/regenerate');
    assert.equal(fresh.status, 201);
    assert.equal(fresh.body.legacy, true);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: org.legacyKey })).status, 401);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: fresh.body.key })).status, 200);
  });

  test('removing an organization member ends their memberships and keys; the last org admin stays', async () => {
    // A member as an accepted invitation leaves them (test/security/organization-invitations.test.ts).
    const tempId = await createUser(p.db, { email: `temp-${suffix}@example.test`, name: 'Temp' });
    await addOrganizationMember(p.db, org.id, tempId, 'Developer');
    const added = { body: { user_id: tempId } };
    const tempKey = (await createApiKey(p.db, { projectId: org.defaultProject, userId: tempId, name: 't' })).secret;
    // An admin changes a member's role by email; an address outside the organization is a 404.
    const promoted = await api(org.adminKey, 'POST', '/organization/members', {
      email: `TEMP-${suffix}@example.test`,
      role: 'Admin',
    });
    assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
    assert.equal(promoted.body.role, 'Admin');
    const outsider = await api(org.adminKey, 'POST', '/organization/members', {
      email: `nobody-${suffix}@example.test`,
      role: 'Admin',
    });
    assert.equal(outsider.status, 404);
    assert.equal(outsider.body.error.code, 'member_not_found');
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: tempKey })).status, 200);
    assert.equal((await api(org.devKey, 'DELETE', `/organization/members/${added.body.user_id}`)).status, 403);

    assert.equal((await api(org.adminKey, 'DELETE', `/organization/members/${added.body.user_id}`)).status, 200);
    assert.equal((await call(p.baseUrl, 'GET', '/v1/whoami', { key: tempKey })).status, 401);
    const members = (await api(org.adminKey, 'GET', '/organization/members')).body.data.map((m: any) => m.user_id);
    assert.deepEqual(members.sort(), [org.adminId, org.devId].sort());

    const lastAdmin = await api(org.adminKey, 'DELETE', `/organization/members/${org.adminId}`);
    assert.equal(lastAdmin.status, 409);
    assert.equal(lastAdmin.body.error.code, 'last_organization_admin');
  });
});
