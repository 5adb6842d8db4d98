/**
 * GET /billing/usage: the beta flag, the report's windows and pages, exact
 * decimal sums, and usage recorded by the workflows that cause it: a
 * fine-tune charged what its estimate quoted and refunded when cancelled,
 * cluster GPU-hours by capacity (on-demand metered, reserved prepaid), and
 * container replica-hours metered by the usage-metering workflow.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import Decimal from 'decimal.js';
import { setBillingUsageEnabled } from '../../db/usage-report';
import { recordUsage } from '../../db/usage';
import { addOrganizationMember, addProjectMember, createApiKey, createProject, createUser } from '../../db/accounts';
import { FAST_CLUSTERS, createCluster, waitForCluster } from '../helpers/clusters';
import { chat, jsonl } from '../helpers/datasets';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

const SERVER = path.resolve(__dirname, '../../examples/http-replica/server.mjs');
const MONTH = new Date().toISOString().slice(0, 7);

describe('billing usage', () => {
  let p: TestPlatform;
  let t: Tenant;

  before(async () => {
    p = await startTestPlatform({ gpuTypes: ['H100_SXM'], env: FAST_CLUSTERS });
    t = await createTenant(p.db);
    await setBillingUsageEnabled(p.db, t.organizationId, true);
  });
  after(() => p.stop());

  const usage = (key: string, query = '') => call(p.baseUrl, 'GET', `/v1/billing/usage${query}`, { key });
  /** Every line item of the month, flattened. */
  const lineItems = async (key: string) =>
    (await usage(key, `?month=${MONTH}&limit=744`)).body.data.flatMap((w: any) => w.line_items);
  const itemsOf = async (resourceId: string) =>
    (await lineItems(t.key)).filter((i: any) => i.attributes.resource_id === resourceId);
  /** A fine-tuning job once it has ended (completed, cancelled or error). */
  const jobEnded = (key: string, id: string) =>
    eventually(
      () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${id}`, { key }),
      (r) => ['completed', 'cancelled', 'error'].includes(r.body.status),
      120_000,
    );
  const sum = (items: any[], field: string) => items.reduce((s, i) => s.plus(i[field]), new Decimal(0));

  test('a beta per organization: a clear 403 until an operator enables it', async () => {
    const other = await createTenant(p.db);
    const refused = await usage(other.key);
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error.code, 'billing_usage_not_enabled');
    assert.match(refused.body.error.message, /beta/);

    const notOperator = await call(p.baseUrl, 'PATCH', `/v1/admin/organizations/${other.organizationId}`, {
      key: other.key,
      json: { billing_usage_enabled: true },
    });
    assert.equal(notOperator.status, 403);
    const operator = await createTenant(p.db, { platformAdmin: true });
    const enabled = await call(p.baseUrl, 'PATCH', `/v1/admin/organizations/${other.organizationId}`, {
      key: operator.key,
      json: { billing_usage_enabled: true },
    });
    assert.equal(enabled.status, 200);
    const empty = await usage(other.key, '?month=2026-01');
    assert.equal(empty.status, 200);
    assert.deepEqual(
      { ...empty.body, organization_id: undefined },
      {
        object: 'list',
        organization_id: undefined,
        billing_period: '2026-01',
        currency: 'USD',
        data: [],
        earliest_window_start: null,
        latest_window_end: null,
        next_cursor: null,
      },
    );
    // Unversioned too, as the spec names it; bad months and unknown parameters are 400s naming them.
    assert.equal((await call(p.baseUrl, 'GET', '/billing/usage', { key: other.key })).status, 200);
    assert.equal((await usage(other.key, '?month=2026-13')).body.error.param, 'month');
    assert.equal((await usage(other.key, '?project=x')).status, 400);
  });

  test("a member sees the usage of the projects they can see; a private project's costs are its members' and the admins'", async () => {
    const org = await createTenant(p.db, { organizationRole: 'Admin', projectRole: 'Admin' }); // its project is private
    await setBillingUsageEnabled(p.db, org.organizationId, true);
    const open = await createProject(p.db, {
      organizationId: org.organizationId,
      name: 'Open',
      slug: `open-${org.projectSlug}`,
      visibility: 'open',
    });
    const dev = await createUser(p.db, { email: `dev-${org.projectSlug}@example.test`, name: 'Dev' });
    await addOrganizationMember(p.db, org.organizationId, dev, 'Developer');
    await addProjectMember(p.db, open, dev, 'Editor');
    const devKey = (await createApiKey(p.db, { projectId: open, userId: dev, name: 'dev' })).secret;
    const spend = (projectId: string, resourceId: string) =>
      recordUsage(p.db, {
        projectId,
        product: 'Test product',
        resourceId,
        quantity: '1',
        unit: 'unit',
        unitPrice: '2.5',
        attributes: { resource_id: resourceId },
        idempotencyKey: `visibility/${resourceId}`,
      });
    await spend(org.projectId, `private-${org.projectSlug}`);
    await spend(open, `open-${org.projectSlug}`);
    const resources = async (key: string) =>
      (await lineItems(key)).map((i: any) => i.attributes.resource_id as string).sort();
    assert.deepEqual(await resources(devKey), [`open-${org.projectSlug}`], 'the private project is not shown');
    assert.deepEqual(await resources(org.key), [`open-${org.projectSlug}`, `private-${org.projectSlug}`].sort());
  });

  test('windows by day or hour, pages by cursor, exact decimal sums', async () => {
    const o = await createTenant(p.db);
    await setBillingUsageEnabled(p.db, o.organizationId, true);
    const at = (iso: string) => new Date(iso);
    const add = (key: string, occurredAt: Date, quantity: string, unitPrice: string) =>
      recordUsage(p.db, {
        projectId: o.projectId,
        product: 'Test product',
        resourceId: 'res-1',
        quantity,
        unit: 'unit',
        unitPrice,
        occurredAt,
        idempotencyKey: `test/${o.projectId}/${key}`,
      });
    // 0.1 + 0.2 must be 0.3, not 0.30000000000000004.
    await add('a', at('2026-03-01T10:15:00Z'), '1', '0.1');
    await add('b', at('2026-03-01T10:45:00Z'), '1', '0.1');
    await add('b', at('2026-03-01T10:45:00Z'), '1', '0.1'); // the same key again: recorded once
    await add('c', at('2026-03-01T11:05:00Z'), '2', '0.1');
    await add('d', at('2026-03-03T00:00:00Z'), '3', '0.1');
    await add('e', at('2026-04-01T00:00:00Z'), '5', '0.1'); // next month

    const daily = (await usage(o.key, '?month=2026-03')).body;
    assert.equal(daily.billing_period, '2026-03');
    assert.deepEqual(
      daily.data.map((w: any) => [
        w.date,
        w.start_time,
        w.end_time,
        w.line_items.map((i: any) => [i.quantity, i.cost]),
      ]),
      [
        ['2026-03-01', '2026-03-01T00:00:00.000Z', '2026-03-02T00:00:00.000Z', [['4', '0.4']]],
        ['2026-03-03', '2026-03-03T00:00:00.000Z', '2026-03-04T00:00:00.000Z', [['3', '0.3']]],
      ],
    );
    assert.equal(daily.earliest_window_start, '2026-03-01T00:00:00.000Z');
    assert.equal(daily.latest_window_end, '2026-03-04T00:00:00.000Z');
    assert.equal(daily.data[0].line_items[0].unit_price, '0.1');
    assert.equal(daily.data[0].line_items[0].product_name, 'Test product');

    const hourly = (await usage(o.key, '?month=2026-03&granularity=hourly')).body;
    assert.deepEqual(
      hourly.data.map((w: any) => [w.start_time, w.line_items[0].cost]),
      [
        ['2026-03-01T10:00:00.000Z', '0.2'],
        ['2026-03-01T11:00:00.000Z', '0.2'],
        ['2026-03-03T00:00:00.000Z', '0.3'],
      ],
    );

    const first = (await usage(o.key, '?month=2026-03&granularity=hourly&limit=2')).body;
    assert.equal(first.data.length, 2);
    assert.ok(first.next_cursor);
    assert.equal(first.latest_window_end, '2026-03-03T01:00:00.000Z', 'describes the whole month, not the page');
    const second = (
      await usage(o.key, `?month=2026-03&granularity=hourly&limit=2&cursor=${encodeURIComponent(first.next_cursor)}`)
    ).body;
    assert.deepEqual(
      second.data.map((w: any) => w.start_time),
      ['2026-03-03T00:00:00.000Z'],
    );
    assert.equal(second.next_cursor, null);

    // Another organization's usage never appears.
    assert.ok((await lineItems(t.key)).every((i: any) => i.product_name !== 'Test product'));
  });

  test('a fine-tune the remaining credit does not cover is refused at creation (402), and nothing is created', async () => {
    const poor = await createTenant(p.db);
    await setBillingUsageEnabled(p.db, poor.organizationId, true);
    await p.db.query('UPDATE organizations SET credit_limit = 0.000001 WHERE id = $1', [poor.organizationId]);
    const records = Array.from({ length: 16 }, (_, i) => chat(`What is ${i} + 2?`, `${i} + 2 = ${i + 2}.`));
    const train = await uploadValidated(p, poor.key, 'poor-train.jsonl', jsonl(...records));
    const job = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: poor.key,
      json: {
        model: 'gantry/reference-byte-tiny',
        training_file: train,
        n_epochs: 1,
        batch_size: 8,
        max_seq_length: 64,
      },
    });
    assert.equal(job.status, 402, JSON.stringify(job.body));
    assert.equal(job.body.error.code, 'insufficient_credit');
    assert.match(job.body.error.message, /credit left/);
    assert.deepEqual((await call(p.baseUrl, 'GET', '/v1/fine-tunes', { key: poor.key })).body.data, []);
    assert.equal((await call(p.baseUrl, 'DELETE', `/v1/files/${train}`, { key: poor.key })).status, 200, 'not in use');
  });

  test('credit for one job, two created at once: the second fails before training, charged nothing', async () => {
    const tight = await createTenant(p.db);
    await setBillingUsageEnabled(p.db, tight.organizationId, true);
    const records = Array.from({ length: 16 }, (_, i) => chat(`What is ${i} + 3?`, `${i} + 3 = ${i + 3}.`));
    const train = await uploadValidated(p, tight.key, 'tight-train.jsonl', jsonl(...records));
    const body = {
      model: 'gantry/reference-byte-tiny',
      training_file: train,
      n_epochs: 1,
      batch_size: 8,
      max_seq_length: 64,
    };
    const quote = await call(p.baseUrl, 'POST', '/v1/fine-tunes/estimate-price', { key: tight.key, json: body });
    // Exactly one job's price: each creation's check passes, the second charge at training start cannot.
    await p.db.query('UPDATE organizations SET credit_limit = $2 WHERE id = $1', [
      tight.organizationId,
      quote.body.estimated_total_price,
    ]);
    const created = await Promise.all(
      [1, 2].map(() => call(p.baseUrl, 'POST', '/v1/fine-tunes', { key: tight.key, json: body })),
    );
    for (const c of created) assert.equal(c.status, 200, JSON.stringify(c.body));
    const ended = await Promise.all(created.map((c) => jobEnded(tight.key, c.body.id)));
    const statuses = ended.map((e) => e.body.status).sort();
    assert.deepEqual(statuses, ['completed', 'error']);
    const failed = ended.find((e) => e.body.status === 'error')!;
    assert.match(failed.body.error, /credit left; nothing was charged/);
    const events = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${failed.body.id}/events`, { key: tight.key })).body
      .data;
    assert.ok(!events.some((e: any) => e.type === 'job_start'), 'training never started');
    const charged = (await lineItems(tight.key)).filter((i: any) => i.attributes.resource_id === failed.body.id);
    assert.deepEqual(charged, []);
  });

  test('a fine-tune is charged the tokens its tokenization counted (here what the quote said); a cancelled one gets its unused tokens back', async () => {
    const records = Array.from({ length: 32 }, (_, i) => chat(`What is ${i} + 5?`, `${i} + 5 = ${i + 5}.`));
    const train = await uploadValidated(p, t.key, 'bill-train.jsonl', jsonl(...records));
    const evalFile = await uploadValidated(p, t.key, 'bill-eval.jsonl', jsonl(...records.slice(0, 8)));
    const body = {
      model: 'gantry/reference-byte-tiny',
      training_file: train,
      validation_file: evalFile,
      n_epochs: 2,
      n_evals: 2,
      batch_size: 8,
      max_seq_length: 64,
      learning_rate: 0.01,
      training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16 },
    };
    const estimate = await call(p.baseUrl, 'POST', '/v1/fine-tunes/estimate-price', { key: t.key, json: body });
    assert.equal(estimate.status, 200);
    const job = await call(p.baseUrl, 'POST', '/v1/fine-tunes', { key: t.key, json: body });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const done = await jobEnded(t.key, job.body.id);
    assert.equal(done.body.status, 'completed');

    const items = await itemsOf(job.body.id);
    const trainItem = items.find((i: any) => i.product_name === 'Fine-tuning - Training Tokens');
    const evalItem = items.find((i: any) => i.product_name === 'Fine-tuning - Evaluation Tokens');
    assert.equal(Number(trainItem.quantity), estimate.body.estimated_train_token_count);
    // Packed rows: the charge is every token the job's tokenization counted (its token_count), per epoch.
    assert.equal(Number(trainItem.quantity), Number(done.body.token_count) * 2);
    assert.equal(Number(evalItem.quantity), estimate.body.estimated_eval_token_count);
    assert.equal(sum(items, 'cost').toString(), new Decimal(estimate.body.estimated_total_price).toString());
    assert.deepEqual(trainItem.pricing_dimensions, {
      model: 'gantry/reference-byte-tiny',
      training_type: 'lora',
      method: 'sft',
    });
    assert.ok(!items.some((i: any) => i.product_name.includes('Refund')), 'every step ran: nothing to refund');

    // A long job (640 steps), cancelled once it has trained a few: the steps that did not run come back.
    const many = Array.from({ length: 256 }, (_, i) => chat(`What is ${i} + 7?`, `${i} + 7 = ${i + 7}.`));
    const longTrain = await uploadValidated(p, t.key, 'bill-long.jsonl', jsonl(...many));
    const long = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: t.key,
      json: { ...body, training_file: longTrain, n_epochs: 20, n_evals: 0, validation_file: undefined },
    });
    assert.equal(long.status, 200, JSON.stringify(long.body));
    await eventually(
      async () => ({
        status: (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${long.body.id}`, { key: t.key })).body.status,
        step: (await p.db.query('SELECT max(step) AS s FROM fine_tune_metrics WHERE job_id = $1', [long.body.id]))
          .rows[0].s,
      }),
      (v) => v.step !== null && v.step >= 3,
      120_000,
    );
    await call(p.baseUrl, 'POST', `/v1/fine-tunes/${long.body.id}/cancel`, { key: t.key });
    const cancelled = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${long.body.id}`, { key: t.key }),
      (r) => ['cancelled', 'completed', 'error'].includes(r.body.status),
      120_000,
    );
    assert.equal(cancelled.body.status, 'cancelled');
    const longItems = await itemsOf(long.body.id);
    const charged = longItems.find((i: any) => i.product_name === 'Fine-tuning - Training Tokens');
    const refund = longItems.find((i: any) => i.product_name === 'Fine-tuning - Refund of Unused Tokens');
    assert.ok(refund, JSON.stringify(longItems));
    assert.ok(new Decimal(refund.cost).isNegative());
    assert.ok(new Decimal(refund.cost).abs().lt(charged.cost), 'the steps that ran stay charged');
    const { rows } = await p.db.query<{ steps: number }>(
      'SELECT max(step) AS steps FROM fine_tune_metrics WHERE job_id = $1',
      [long.body.id],
    );
    const totalSteps = (await p.db.query('SELECT total_steps FROM fine_tunes WHERE id = $1', [long.body.id])).rows[0]
      .total_steps;
    const expectedBack = new Decimal(charged.quantity)
      .mul(totalSteps - rows[0].steps)
      .div(totalSteps)
      .toDecimalPlaces(0, Decimal.ROUND_DOWN);
    assert.equal(new Decimal(refund.quantity).neg().toString(), expectedBack.toString());
    const events = (await call(p.baseUrl, 'GET', `/v1/fine-tunes/${long.body.id}/events`, { key: t.key })).body.data;
    assert.ok(
      events.some((e: any) => e.type === 'refund' && /Refunded \$/.test(e.message)),
      JSON.stringify(events),
    );
  });

  test('cluster GPU-hours: on-demand metered while nodes exist, reserved prepaid for the reservation', async () => {
    const onDemand = await createCluster(p, t.key, { cluster_name: 'bill-od', num_gpus: 8 });
    await waitForCluster(p, t.key, onDemand.cluster_id, (c) => c.status === 'Ready');
    const reserved = await createCluster(p, t.key, {
      cluster_name: 'bill-rsv',
      num_gpus: 8,
      billing_type: 'RESERVED',
      duration_days: 1,
    });
    await waitForCluster(p, t.key, reserved.cluster_id, (c) => c.status === 'Ready');
    await new Promise((r) => setTimeout(r, 1500));
    for (const id of [onDemand.cluster_id, reserved.cluster_id]) {
      await call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${id}`, { key: t.key });
    }
    for (const id of [onDemand.cluster_id, reserved.cluster_id])
      await waitForCluster(p, t.key, id, (c) => !!c.deleted_at);
    const od = await itemsOf(onDemand.cluster_id);
    assert.ok(od.length > 0);
    assert.ok(od.every((i: any) => i.product_name === 'GPU Clusters - On-Demand GPU Hours'));
    assert.deepEqual(od[0].pricing_dimensions, {
      gpu_type: 'H100_SXM',
      region: 'sim-us-east-1',
      billing_type: 'ON_DEMAND',
    });
    // The default list prices docs/billing.md states (an H100 SXM GPU-hour: on-demand 2.99, reserved 1.75).
    assert.equal(od[0].unit_price, '2.99');
    const hours = sum(od, 'quantity');
    // 8 GPUs for at least the 1.5 s it waited, and less than the test's minute.
    assert.ok(hours.gt(new Decimal(8 * 1.5).div(3600)) && hours.lt(new Decimal(8 * 60).div(3600)), hours.toString());
    // Each ledger record is rounded to the micro-dollar once; a line sums a few of them.
    for (const i of od) {
      const exact = new Decimal(i.quantity).mul(i.unit_price);
      assert.ok(exact.minus(i.cost).abs().lte('0.00001'), `${i.cost} vs ${exact}`);
    }

    const rsv = await itemsOf(reserved.cluster_id);
    const prepaid = rsv.filter((i: any) => i.product_name === 'GPU Clusters - Reserved GPU Hours (prepaid)');
    assert.equal(prepaid.length, 1);
    assert.equal(prepaid[0].quantity, '192', '8 reserved GPUs for 24 hours');
    assert.equal(prepaid[0].unit_price, '1.75');
    assert.equal(prepaid[0].cost, '336', '192 GPU-hours at 1.75');
    assert.ok(!rsv.some((i: any) => i.product_name.includes('On-Demand')), 'reserved GPUs are not metered again');
  });

  test('container replicas: metered by the usage-metering workflow while they run, closed when deleted', async () => {
    const created = await call(p.baseUrl, 'POST', '/v1/deployments', {
      key: t.key,
      json: {
        name: 'bill-web',
        image: 'example/http-replica:1',
        gpu_type: 'h100-80gb',
        command: [process.execPath, SERVER],
        health_check_path: '/health',
        min_replicas: 1,
        max_replicas: 1,
      },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.id;
    await eventually(
      async () =>
        (await p.db.query(`SELECT 1 FROM deployment_replicas WHERE deployment_id = $1 AND status = 'Running'`, [id]))
          .rowCount,
      (n) => n === 1,
      60_000,
    );
    await new Promise((r) => setTimeout(r, 1000));
    // The schedule's workflow, started by hand: what accrued so far appears while the replica keeps running.
    const metered = await p.temporal.workflow.execute('meterUsage', {
      taskQueue: 'control',
      workflowId: `usage-metering-test-${id}`,
      args: [],
    });
    assert.ok((metered as number) >= 1);
    const running = await itemsOf(id);
    assert.equal(running.length, 1);
    assert.equal(running[0].product_name, 'Container Deployments - Replica Hours');
    const before = new Decimal(running[0].quantity);
    assert.ok(before.gt(0));
    // A replica without GPUs, at docs/billing.md's default 0.10 a replica-hour; its cost is quantity x price.
    assert.deepEqual(running[0].pricing_dimensions, { gpu_type: 'none', gpu_count: '0' }, 'it asked for no GPUs');
    assert.equal(running[0].unit_price, '0.1');
    assert.ok(before.mul('0.1').minus(running[0].cost).abs().lte('0.00001'), `${running[0].cost} for ${before} h`);

    await call(p.baseUrl, 'DELETE', `/v1/deployments/bill-web`, { key: t.key });
    await eventually(
      async () => (await p.db.query('SELECT 1 FROM deployments WHERE id = $1', [id])).rowCount,
      (n) => n === 0,
      60_000,
    );
    const after = sum(await itemsOf(id), 'quantity');
    assert.ok(after.gt(before), `${after} > ${before}: the time since the pass is recorded when it stops`);
    const open = await p.db.query(`SELECT 1 FROM metered_intervals WHERE meter_key LIKE $1 AND ended_at IS NULL`, [
      `replica/${id}/%`,
    ]);
    assert.equal(open.rowCount, 0);
  });
});
