/**
 * Attack: be the second tenant of an installation whose replicas run as host processes.
 *
 * GANTRY_CONTAINER_RUNTIME=process runs a deployment's command as a process of Gantry's own user,
 * with no isolation: a replica reads what Gantry can (its data directory, keys, database). That is
 * only safe for one trusted tenant, so the runtime starts only where the installation says so
 * (GANTRY_SINGLE_TENANT=yes), the API then creates no second project, and a process host runs one
 * project's replicas and refuses any other's: a second project's deployment (one made before the
 * installation said single-tenant, here made straight in the database) never runs its command.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { deployHttpReplica, HTTP_REPLICA } from '../helpers/deployments';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { startProcess, type StartedProcess } from '../helpers/processes';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('the process runtime starts only on an installation that says it is single-tenant', () => {
  const started: StartedProcess[] = [];
  after(() => {
    for (const w of started) if (w.child.exitCode === null) w.child.kill('SIGKILL');
  });

  /** A container host with the process runtime: its exit, or null once it polls (it started). */
  async function startHost(env: Record<string, string>) {
    const w = startProcess('workers/container-host.ts', { GANTRY_CONTAINER_RUNTIME: 'process', ...env });
    started.push(w);
    const text = () => w.lines.map((l) => JSON.stringify(l)).join('\n');
    const settled = await eventually(
      async () => ({
        polling: w.lines.some((l) => /container host polling/.test(String(l.msg))),
        exited: w.child.exitCode !== null,
      }),
      (s) => s.polling || s.exited,
      60_000,
      100,
    );
    return { outcome: settled.exited ? await w.exited : null, text: text() };
  }

  for (const [what, env] of [
    ['unset', {}],
    ['not in so many words', { GANTRY_SINGLE_TENANT: 'true' }],
  ] as const) {
    test(`GANTRY_SINGLE_TENANT ${what}: the host does not start, and says why`, async () => {
      const { outcome, text } = await startHost(env);
      assert.notEqual(outcome, null, `the host started and polled:\n${text}`);
      assert.notEqual(outcome!.code, 0);
      assert.match(text, /GANTRY_SINGLE_TENANT/);
    });
  }

  test('GANTRY_SINGLE_TENANT=yes: it starts', async () => {
    const { outcome, text } = await startHost({ GANTRY_SINGLE_TENANT: 'yes' });
    assert.equal(outcome, null, `the host exited:\n${text}`);
  });
});

describe('a single-tenant installation keeps to one project', () => {
  let p: TestPlatform;
  let first: Tenant;

  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_SINGLE_TENANT: 'yes' } });
    first = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  });
  after(() => p.stop());

  test('the API creates no second project', async () => {
    const res = await call(p.baseUrl, 'POST', '/v1/projects', {
      key: first.key,
      json: { name: 'Second', slug: `second-${first.projectSlug}` },
    });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(res.body.error.code, 'single_tenant_installation');
    assert.match(res.body.error.message, /single-tenant/);
    const { rows } = await p.db.query('SELECT 1 FROM projects WHERE slug = $1', [`second-${first.projectSlug}`]);
    assert.equal(rows.length, 0);
  });

  test("another project's deployment never runs on the process host; the first project's still do", async () => {
    await deployHttpReplica(p, first.key, 'mine');

    const second = await createTenant(p.db);
    const marker = path.join(p.config.dataDir, `second-tenant-ran-${second.projectSlug}`);
    const created = await call(p.baseUrl, 'POST', '/v1/deployments', {
      key: second.key,
      json: {
        name: 'theirs',
        image: 'example/http-replica:1',
        gpu_type: 'h100-80gb',
        // What the second tenant would run as Gantry's user: it leaves a file, then serves.
        command: [
          process.execPath,
          '-e',
          `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran'); import(${JSON.stringify(HTTP_REPLICA)})`,
        ],
        health_check_path: '/health',
        min_replicas: 1,
        max_replicas: 1,
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const settled = await eventually(
      () => call(p.baseUrl, 'GET', '/v1/deployments/theirs', { key: second.key }).then((r) => r.body),
      (d) =>
        Object.values(d.replica_events as Record<string, { replica_status: string }>).some((e) =>
          ['Running', 'Failed'].includes(e.replica_status),
        ),
      30_000,
    );
    const events = Object.values(settled.replica_events) as Array<Record<string, string>>;
    assert.ok(
      events.every((e) => e.replica_status !== 'Running'),
      `a replica of the second project ran: ${JSON.stringify(events)}`,
    );
    const refused = events.find((e) => e.replica_status === 'Failed')!;
    assert.match(refused.replica_status_message!, /one project/);
    assert.match(refused.replica_status_message!, /GANTRY_CONTAINER_RUNTIME=podman/);
    assert.ok(!refused.replica_status_message!.includes(first.projectId), "the other project's id is not told");
    assert.equal(existsSync(marker), false, "the second tenant's command never ran");

    // The project the host serves is not held up by the refusal.
    await deployHttpReplica(p, first.key, 'mine-too');
  });
});
