/**
 * Container deployments with the official Python CLI's `beta jig` (PyPI `together`, pinned), where
 * it runs without building an image: deploy an existing image from a jig.toml (the CLI waits for a
 * replica of the new revision), status, list, logs, the queue (submit, job status, queue status),
 * the SDK's revision history and rollback, destroy; a crash-looping container stops the deploy with
 * its logs; and the SDK's billing usage, paged as it pages. The test platform's container host runs
 * replicas as processes (its `command`); the isolation of images is test/deployments/podman-isolation.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { recordUsage } from '../../db/usage';
import { HTTP_REPLICA } from '../helpers/deployments';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { pythonSdk, together, togetherJson, togetherRun, type PythonClient } from '../helpers/python-sdk';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;
let cli: PythonClient;
const dir = mkdtempSync(path.join(tmpdir(), 'gantry-jig-'));

before(async () => {
  p = await startTestPlatform();
  t = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  admin = await createTenant(p.db, { platformAdmin: true });
  cli = { baseUrl: p.baseUrl, key: t.key, cwd: dir };
  writeJigToml(
    dir,
    'py-jig',
    [process.execPath, HTTP_REPLICA],
    ['[deploy.environment_variables]', 'GREETING = "hello from jig"'],
  );
});

/**
 * A jig.toml for an existing image run by `command`, one replica. The defaults of `jig init` where
 * they matter here: no autoscaling ({}), volume version unset.
 */
function writeJigToml(into: string, name: string, command: string[], more: string[] = []) {
  writeFileSync(
    path.join(into, 'jig.toml'),
    [
      `name = "${name}"`,
      '[deploy]',
      'image = "example/http-replica:1"',
      `command = ${JSON.stringify(command)}`,
      'gpu_type = "h100-80gb"',
      'cpu = 1',
      'memory = 1',
      'min_replicas = 1',
      'max_replicas = 1',
      'health_check_path = "/health"',
      'termination_grace_period_seconds = 1',
      ...more,
    ].join('\n') + '\n',
  );
}
after(() => p.stop());

const jig = (...args: string[]) => together(cli, '--project', t.projectId, 'beta', 'jig', ...args);

test('jig deploy of an existing image waits for its revision to serve; status, list, logs', async () => {
  const out = await jig('deploy');
  assert.match(out, /Deploying configured image example\/http-replica:1/);
  const d = (await call(p.baseUrl, 'GET', '/v1/deployments/py-jig', { key: t.key })).body;
  assert.equal(d.status, 'Ready', JSON.stringify(d));
  const revision = d.environment_variables.find((e: any) => e.name === 'TOGETHER_DEPLOYMENT_REVISION_ID');
  assert.ok(revision, 'the revision the CLI waited for');
  assert.ok(
    Object.values(d.replica_events).some(
      (r: any) => r.revision_id === revision.value && r.replica_status === 'Running',
    ),
  );
  assert.deepEqual(d.autoscaling, {}, 'autoscaling off, as jig.toml leaves it');

  const status = await togetherJson(cli, '--project', t.projectId, 'beta', 'jig', 'status');
  assert.equal(status.name, 'py-jig');
  const listed = await jig('list');
  assert.match(listed, /py-jig/);
  const logs = await jig('logs');
  assert.match(logs, /listening/i);
});

test('the queue from the CLI: submit a job, see it queued, read the queue', async () => {
  const submitted = await togetherJson(
    cli,
    '--project',
    t.projectId,
    'beta',
    'jig',
    'submit',
    '--payload',
    '{"prompt": "hi"}',
  );
  const requestId = submitted.requestId ?? submitted.request_id;
  assert.ok(requestId, JSON.stringify(submitted));
  const job = await togetherJson(cli, '--project', t.projectId, 'beta', 'jig', 'job-status', '--request-id', requestId);
  assert.equal(job.status, 'pending');
  const queue = await togetherJson(cli, '--project', t.projectId, 'beta', 'jig', 'queue-status');
  assert.ok(queue.messages_waiting >= 1 || queue.total_jobs >= 1, JSON.stringify(queue));
});

test("the SDK's revision history: a change is revision 2, a rollback to 1 is revision 3 running 1's spec", async () => {
  const revisionOf = (d: any) =>
    d.environment_variables.find((e: any) => e.name === 'TOGETHER_DEPLOYMENT_REVISION_ID')?.value;
  const greetingOf = (d: any) => d.environment_variables.find((e: any) => e.name === 'GREETING')?.value;
  const changed = await call(p.baseUrl, 'PATCH', '/v1/deployments/py-jig', {
    key: t.key,
    json: { environment_variables: [{ name: 'GREETING', value: 'changed' }] },
  });
  assert.equal(changed.status, 200, JSON.stringify(changed.body));
  assert.equal(revisionOf(changed.body), '2');

  const seen = await pythonSdk(
    cli,
    `
import json
from together import Together
client = Together()
jig = client.beta.jig
history = jig.list_revisions("py-jig")
first = jig.retrieve_revision("1", id="py-jig")
rolled = jig.rollback("py-jig", revision_identifier="1")
print(json.dumps({
    "history": [[e.event_number, e.action, e.revision_id, e.image] for e in history.data],
    "first": {"image": first.image, "env": [[v.name, v.value] for v in first.environment_variables]},
    "rolled": {v.name: v.value for v in rolled.environment_variables},
}))
`,
  );
  assert.deepEqual(seen.history, [
    [2, 'update', '2', 'example/http-replica:1'],
    [1, 'create', '1', 'example/http-replica:1'],
  ]);
  assert.equal(seen.first.image, 'example/http-replica:1');
  assert.deepEqual(
    seen.first.env.find(([name]: string[]) => name === 'GREETING'),
    ['GREETING', 'hello from jig'],
    "revision 1's variables, as jig deploy set them",
  );
  assert.equal(seen.rolled.GREETING, 'hello from jig', "the rollback answers with revision 1's spec");
  assert.equal(seen.rolled.TOGETHER_DEPLOYMENT_REVISION_ID, '3', 'counted as the next revision');

  // The replicas roll to it as to any change; the history names the revision it came from.
  const d = await eventually(
    () => call(p.baseUrl, 'GET', '/v1/deployments/py-jig', { key: t.key }).then((r) => r.body),
    (x: any) =>
      x.status === 'Ready' &&
      x.replica_events &&
      Object.values(x.replica_events).some((e: any) => e.revision_id === '3'),
    60_000,
  );
  assert.equal(greetingOf(d), 'hello from jig');
  const history = (await call(p.baseUrl, 'GET', '/v1/deployments/py-jig/revisions?limit=1', { key: t.key })).body;
  assert.deepEqual(
    history.data.map((e: any) => [e.event_number, e.action, e.rolled_back_to]),
    [[3, 'rollback', '1']],
  );
  const gone = await call(p.baseUrl, 'POST', '/v1/deployments/py-jig/rollback', {
    key: t.key,
    json: { revision_identifier: '99' },
  });
  assert.equal(gone.status, 404);
});

test('jig destroy removes the deployment', async () => {
  await jig('destroy');
  await eventually(
    () => call(p.baseUrl, 'GET', '/v1/deployments/py-jig', { key: t.key }).then((r) => r.status),
    (s) => s === 404,
    30_000,
  );
});

test("jig deploy of a container that keeps crashing stops waiting: 'crash looping', with the replica's logs", async () => {
  const crashDir = mkdtempSync(path.join(tmpdir(), 'gantry-jig-crash-'));
  const crash = 'console.error("fatal: MODEL_PATH is not set"); process.exit(3)';
  writeJigToml(crashDir, 'py-jig-crash', [process.execPath, '-e', crash]);
  const crashCli = { ...cli, cwd: crashDir };
  // Before the crash loop was reported, the CLI polled until its own 600 s limit.
  const r = await togetherRun(crashCli, '--project', t.projectId, 'beta', 'jig', 'deploy');
  assert.notEqual(r.code, 0, r.stdout);
  assert.match(r.stdout, /Container is crash looping/);
  assert.match(r.stdout, /fatal: MODEL_PATH is not set/, "the crashed replica's logs");
  const d = (await call(p.baseUrl, 'GET', '/v1/deployments/py-jig-crash', { key: t.key })).body;
  const looping = Object.values(d.replica_events as Record<string, any>).filter(
    (e) => e.replica_status_reason === 'CrashLoopBackOff',
  );
  assert.ok(looping.length >= 1, JSON.stringify(d.replica_events));
  assert.match(looping[0].replica_status_message, /replicas of revision 1 crashed in the last 10 minutes/);
  await together(crashCli, '--project', t.projectId, 'beta', 'jig', 'destroy');
});

test('billing usage through the SDK: by day and by hour, paged with after', async () => {
  const enabled = await call(p.baseUrl, 'PATCH', `/v1/admin/organizations/${t.organizationId}`, {
    key: admin.key,
    json: { billing_usage_enabled: true },
  });
  assert.equal(enabled.status, 200, JSON.stringify(enabled.body));
  // Usage on three days of March 2026, the last of them in two hours.
  for (const at of ['2026-03-01T10:15:00Z', '2026-03-02T10:15:00Z', '2026-03-03T10:15:00Z', '2026-03-03T11:15:00Z']) {
    await recordUsage(p.db, {
      projectId: t.projectId,
      product: 'Test product',
      resourceId: 'res-1',
      quantity: '1',
      unit: 'unit',
      unitPrice: '0.5',
      occurredAt: new Date(at),
      idempotencyKey: `test/${t.projectId}/${at}`,
    });
  }
  const seen = await pythonSdk(
    cli,
    `
import json
from together import Together
client = Together()
costs = client.organization.usage.costs
daily = costs.list(month="2026-03", granularity="day", limit=2)
pages = [[w.date for w in daily.data]]
page = daily
while page.has_next_page():
    page = page.get_next_page()
    pages.append([w.date for w in page.data])
hourly = costs.list(month="2026-03", granularity="hour", limit=1000, organization_id=${JSON.stringify(t.organizationId)})
print(json.dumps({"pages": pages, "hours": [w.start_time for w in hourly.data]}, default=str))
`,
  );
  assert.deepEqual(
    seen.pages,
    [['2026-03-01', '2026-03-02'], ['2026-03-03']],
    'two pages, the second asked for with after',
  );
  assert.equal(seen.hours.length, 4);
});
