/**
 * A sealed value opens only in the row it was sealed for. Someone who can write a row's sealed
 * column (an SQL injection elsewhere, a restore gone wrong, a buggy move between projects) must
 * not be able to carry another tenant's secret into a row of their own and have Gantry open it.
 *
 * The attacker holds a project key and, here, a way to write their own secret's row: they copy
 * the victim's sealed value into it and deploy a replica that reads their own secret.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { HTTP_REPLICA } from '../helpers/deployments';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('sealed values are bound to their row', () => {
  let p: TestPlatform;
  let victim: Tenant;
  let attacker: Tenant;

  before(async () => {
    p = await startTestPlatform();
    victim = await createTenant(p.db);
    attacker = await createTenant(p.db);
  });
  after(() => p.stop());

  const api = (key: string, method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v1${path}`, { key, json });

  test("another project's secret copied into the attacker's row does not open", async () => {
    const victimValue = `victim-db-password-${Date.now()}`;
    const theirs = await api(victim.key, 'POST', '/deployments/secrets', { name: 'db-password', value: victimValue });
    const mine = await api(attacker.key, 'POST', '/deployments/secrets', { name: 'mine', value: 'attacker-own' });
    assert.equal(theirs.status, 200, JSON.stringify(theirs.body));
    assert.equal(mine.status, 200, JSON.stringify(mine.body));

    // The attacker's write: the victim's sealed bytes into the attacker's own row.
    const moved = await p.db.query(
      `UPDATE deployment_secrets SET sealed_value = (SELECT sealed_value FROM deployment_secrets WHERE id = $1)
        WHERE id = $2`,
      [theirs.body.id, mine.body.id],
    );
    assert.equal(moved.rowCount, 1);

    const created = await api(attacker.key, 'POST', '/deployments', {
      name: 'reader',
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, HTTP_REPLICA],
      health_check_path: '/health',
      min_replicas: 1,
      max_replicas: 1,
      termination_grace_period_seconds: 1,
      environment_variables: [{ name: 'TOKEN', value_from_secret: 'mine' }],
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));

    // Wait for the launch to have happened one way or the other: a replica that runs, or one that failed.
    const outcome = await eventually(
      () => api(attacker.key, 'GET', '/deployments/reader').then((r) => r.body),
      (d) =>
        d.status === 'Ready' ||
        Object.values(d.replica_events as Record<string, { replica_status: string }>).some(
          (e) => e.replica_status === 'Failed',
        ),
      30_000,
    );
    if (outcome.status === 'Ready') {
      const token = await fetch(`${p.gatewayUrl}/v1/deployments/reader/env?name=TOKEN`, {
        headers: { authorization: `Bearer ${attacker.key}` },
      }).then((r) => r.text());
      assert.notEqual(token, victimValue, "the replica was given the victim's secret");
    }
    const failed = Object.values(outcome.replica_events as Record<string, any>).find(
      (e) => e.replica_status === 'Failed',
    );
    assert.ok(failed, `no replica failed: ${JSON.stringify(outcome)}`);
    assert.equal(failed.replica_status_reason, 'SecretNotFound');
    assert.match(failed.replica_status_message, /cannot be opened/);
    assert.doesNotMatch(JSON.stringify(outcome), new RegExp(victimValue));
  });
});
