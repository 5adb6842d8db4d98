/**
 * An organization admin is an ordinary tenant: anyone can have an organization of their own.
 * Adding a person by email must not tell them whether the address belongs to someone on this
 * installation, nor that person's name, nor make that person a member of an organization they
 * never agreed to join. People are invited; the invitee accepts with their own key.
 *
 * The attacker is the admin of their own organization; the victim is a user of another one.
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
import { createTenant, type Tenant } from '../helpers/tenants';

describe('adding people to an organization', () => {
  let p: TestPlatform;
  let attacker: { key: string; organizationId: string; defaultProjectId: string };
  let victim: Tenant & { email: string; name: string };
  const suffix = randomBytes(3).toString('hex');
  const nobody = `nobody-${suffix}@example.test`;

  const api = (key: string, method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v1${path}`, { key, json });
  /** What a response tells, with the address the caller sent taken out. */
  const shape = (body: unknown, email: string) => JSON.stringify(body).replaceAll(email, '<email>');

  before(async () => {
    p = await startTestPlatform({ containers: false });
    const organizationId = await createOrganization(p.db, `Attacker ${suffix}`);
    const defaultProjectId = await createProject(p.db, {
      organizationId,
      name: 'Default',
      slug: `att-${suffix}`,
      isDefault: true,
    });
    const adminId = await createUser(p.db, { email: `eve-${suffix}@example.test`, name: 'Eve' });
    await addOrganizationMember(p.db, organizationId, adminId, 'Admin');
    await addProjectMember(p.db, defaultProjectId, adminId, 'Admin');
    const key = (await createApiKey(p.db, { projectId: defaultProjectId, userId: adminId, name: 'eve' })).secret;
    attacker = { key, organizationId, defaultProjectId };

    const t = await createTenant(p.db);
    const row = (await p.db.query('SELECT email, name FROM users WHERE id = $1', [t.userId])).rows[0];
    victim = { ...t, email: row.email, name: row.name };
  });
  after(() => p.stop());

  test('adding an address answers alike whether it belongs to a user or not, and names nobody', async () => {
    const existing = await api(attacker.key, 'POST', '/organization/members', {
      email: victim.email,
      role: 'Developer',
    });
    const unknown = await api(attacker.key, 'POST', '/organization/members', { email: nobody, role: 'Developer' });
    assert.doesNotMatch(JSON.stringify(existing.body), new RegExp(victim.name), 'the victim’s name is not told');
    assert.equal(existing.status, unknown.status);
    assert.equal(shape(existing.body, victim.email), shape(unknown.body, nobody));

    const invited = await api(attacker.key, 'POST', '/organization/invitations', {
      email: victim.email,
      role: 'Developer',
    });
    const invitedNobody = await api(attacker.key, 'POST', '/organization/invitations', {
      email: nobody,
      role: 'Developer',
    });
    assert.equal(invited.status, 201, JSON.stringify(invited.body));
    assert.equal(invitedNobody.status, 201, JSON.stringify(invitedNobody.body));
    assert.doesNotMatch(JSON.stringify(invited.body), new RegExp(`${victim.name}|${victim.userId}`));
    const keys = (b: object) => Object.keys(b).sort();
    assert.deepEqual(keys(invited.body), keys(invitedNobody.body));
    assert.equal(invited.body.object, 'organization.invitation');

    // Neither address is a member: nothing was done to the victim's account.
    const members = (await api(attacker.key, 'GET', '/organization/members')).body.data;
    assert.ok(Array.isArray(members) && members.length === 1, JSON.stringify(members));
    assert.ok(!members.some((m: any) => m.email === victim.email || m.email === nobody));
    assert.equal(
      (await p.db.query('SELECT 1 FROM users WHERE lower(email) = lower($1)', [nobody])).rowCount,
      0,
      'no user is made for an address',
    );
    const pending = (await api(attacker.key, 'GET', '/organization/invitations')).body.data;
    assert.deepEqual(pending.map((i: any) => i.email).sort(), [victim.email, nobody].sort());
  });

  test('only the invitee, with their own key, makes the invitation a membership', async () => {
    const invitation = (await api(victim.key, 'GET', '/invitations')).body.data.find(
      (i: any) => i.organization_id === attacker.organizationId,
    );
    assert.ok(invitation, 'the victim sees the invitation');
    assert.equal(invitation.role, 'Developer');

    // Someone else (here: the inviting admin) cannot accept it for them.
    const forged = await api(attacker.key, 'POST', `/invitations/${invitation.id}/accept`);
    assert.equal(forged.status, 404, JSON.stringify(forged.body));
    assert.ok(
      !(await api(attacker.key, 'GET', '/organization/members')).body.data.some((m: any) => m.email === victim.email),
    );

    const accepted = await api(victim.key, 'POST', `/invitations/${invitation.id}/accept`);
    assert.equal(accepted.status, 201, JSON.stringify(accepted.body));
    assert.equal(accepted.body.organization_id, attacker.organizationId);
    const members = (await api(attacker.key, 'GET', '/organization/members')).body.data;
    assert.equal(members.find((m: any) => m.email === victim.email)?.role, 'Developer');
    // The key that comes with it works in the organization's default project.
    const me = await api(accepted.body.api_key.key, 'GET', '/whoami');
    assert.equal(me.body.project_id, attacker.defaultProjectId);
    assert.equal(me.body.user_id, victim.userId);
    assert.equal((await api(victim.key, 'GET', '/invitations')).body.data.length, 0, 'an invitation is used once');
  });

  test('an invitee can decline; an admin can withdraw', async () => {
    const again = await api(attacker.key, 'POST', '/organization/invitations', {
      email: `second-${suffix}@example.test`,
      role: 'Admin',
    });
    const withdrawn = await api(attacker.key, 'DELETE', `/organization/invitations/${again.body.id}`);
    assert.equal(withdrawn.status, 200, JSON.stringify(withdrawn.body));
    assert.ok(
      !(await api(attacker.key, 'GET', '/organization/invitations')).body.data.some((i: any) => i.id === again.body.id),
    );

    const other = await createTenant(p.db, { organizationRole: 'Admin' });
    const asked = await api(other.key, 'POST', '/organization/invitations', { email: victim.email, role: 'Admin' });
    assert.equal(asked.status, 201);
    assert.equal((await api(victim.key, 'DELETE', `/invitations/${asked.body.id}`)).status, 200);
    assert.equal(
      (await api(victim.key, 'POST', `/invitations/${asked.body.id}/accept`)).status,
      404,
      'a declined invitation is gone',
    );
  });
});
