/**
 * Evaluations through the official npm SDK (together-ai, client.evals) against a real stack. The
 * judge is `external`: an OpenAI-compatible server this test runs (test/helpers/rule-judge.ts),
 * whose verdicts follow a rule over what it is sent, so the counts a user would compute from the
 * file by hand are known; an answer it gives without a verdict must be counted invalid. The model evaluated is a column of
 * pre-generated answers, or a dedicated endpoint of the reference byte model (its answers are
 * gibberish; what matters is that each row was generated through the gateway and judged).
 */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { modelServerRequests, readyReferenceEndpoint, uploadBatchInput } from '../helpers/reference-endpoint';
import { JUDGE_TOKEN, startRuleJudge, type JudgeCall } from '../helpers/rule-judge';
import { createTenant, type Tenant } from '../helpers/tenants';
import { setBillingUsageEnabled } from '../../db/usage-report';
import { evaluationWorkflowId } from '../../shared/evaluations';
import { recordHistoryIfAsked } from '../helpers/workflow-env';

describe('official SDK: evaluations', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;
  let judge: Server;
  let judgeUrl: string;
  const calls: JudgeCall[] = [];

  before(async () => {
    // The judge listens on loopback: this test lets the platform reach private addresses.
    p = await startTestPlatform({ env: { GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' } });
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, maxRetries: 0 });
    judge = await startRuleJudge(calls);
    judgeUrl = `http://127.0.0.1:${(judge.address() as AddressInfo).port}/v1`;
  });
  after(async () => {
    judge.close();
    await p.stop();
  });

  const externalJudge = (system_template: string) => ({
    model: 'judge-1',
    model_source: 'external' as const,
    system_template,
    external_base_url: judgeUrl,
    external_api_token: JUDGE_TOKEN,
  });
  const upload = (rows: unknown[]) => uploadBatchInput(p, tenant.key, rows, 'eval');
  /** The evaluation once it ended; its run's history recorded as `label` when GANTRY_RECORD_HISTORIES=1. */
  const ended = async (id: string, label?: string) => {
    const job = await eventually(
      () => client.evals.retrieve(id),
      (e) => ['completed', 'error', 'user_error'].includes(e.status!),
      90_000,
    );
    const handle = p.temporal.workflow.getHandle(evaluationWorkflowId(id));
    if (label) {
      await eventually(
        async () => (await handle.describe()).status.name,
        (s) => s !== 'RUNNING',
      );
      await recordHistoryIfAsked(handle, 'evaluation', label);
    }
    return job;
  };
  const resultRows = async (fileId: string) =>
    (await (await client.files.content(fileId)).text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  test('classify a column of answers: label counts, pass percentage, an invalid verdict and a missing answer counted', async () => {
    const rows = [
      { q: 'one', answer: 'a', mark: 'good' },
      { q: 'two', answer: 'b', mark: 'good' },
      { q: 'three', answer: 'c', mark: 'bad' },
      { q: 'four', answer: 'd', mark: 'good' },
      { q: 'five', answer: 'e', mark: 'junk' },
      { q: 'six', mark: 'good' }, // no answer to judge
    ];
    const file = await upload(rows);
    const before = calls.length;
    const created = await client.evals.create({
      type: 'classify',
      parameters: {
        input_data_file_path: file,
        judge: externalJudge('Is the answer to {{ q }} good? MARK:{{ mark }}'),
        labels: ['good', 'bad'],
        pass_labels: ['good'],
        model_to_evaluate: 'answer',
      },
    });
    assert.equal(created.status, 'pending');
    const job = await ended(created.workflow_id!, 'classify-completed');
    assert.equal(job.status, 'completed', JSON.stringify(job));
    const r = job.results as Record<string, unknown>;
    // By hand: 5 rows judged (the sixth has no answer), 4 with a label (3 good, 1 bad), 1 without.
    assert.deepEqual(JSON.parse(r.label_counts as string), { good: 3, bad: 1 });
    assert.equal(r.pass_percentage, 75);
    assert.equal(r.invalid_label_count, 1);
    assert.equal(r.generation_fail_count, 1);
    assert.equal(r.judge_fail_count, 0);
    // Each judged row asked the judge once, with its token, and its template filled from the row.
    const mine = calls.slice(before);
    assert.equal(mine.length, 5);
    assert.ok(mine.every((c) => c.authorization === `Bearer ${JUDGE_TOKEN}`));
    assert.ok(mine.some((c) => c.system.startsWith('Is the answer to three good? MARK:bad')));
    assert.ok(mine.some((c) => c.user === 'Response to judge:\nc'));

    const results = await resultRows(r.result_file_id as string);
    assert.deepEqual(
      results.map((x) => [x.q, x.verdict]),
      [
        ['one', 'good'],
        ['two', 'good'],
        ['three', 'bad'],
        ['four', 'good'],
        ['five', null],
        ['six', null],
      ],
    );
    assert.equal(results[4].judge_feedback, 'This answer seems fine to me.');
    assert.deepEqual(
      job.status_updates!.map((u) => u.status),
      ['pending', 'running', 'completed'],
    );
    // The token is never shown again.
    assert.ok(!JSON.stringify(job).includes(JUDGE_TOKEN));
    const listed = await client.evals.list();
    assert.ok(listed.some((e) => e.workflow_id === created.workflow_id));
    assert.equal((await client.evals.status(created.workflow_id!)).status, 'completed');
  });

  test('score a dedicated endpoint: each row generated through the gateway, scores out of range invalid', async () => {
    const model = await readyReferenceEndpoint(p, tenant, 'evaluated');
    const file = await upload([
      { topic: 'a', expected: 2 },
      { topic: 'b', expected: 4 },
      { topic: 'c', expected: 5 },
      { topic: 'd', expected: 9 },
    ]);
    const generationsBefore = await modelServerRequests(p, model);
    const created = await client.evals.create({
      type: 'score',
      parameters: {
        input_data_file_path: file,
        judge: externalJudge('Score 1 to 5. expected={{ expected }}'),
        min_score: 1,
        max_score: 5,
        pass_threshold: 4,
        model_to_evaluate: {
          model,
          model_source: 'dedicated',
          system_template: 'You write about {{ topic }}.',
          input_template: 'Write about {{ topic }}.',
          max_tokens: 4,
          temperature: 0,
        },
      },
    });
    const job = await ended(created.workflow_id!, 'score-generated-completed');
    assert.equal(job.status, 'completed', JSON.stringify(job));
    const r = job.results as { aggregated_scores: Record<string, number> } & Record<string, unknown>;
    // By hand: scores 2, 4, 5 (9 is outside 1..5): mean 11/3, population std, 2 of 3 at or above 4.
    assert.ok(Math.abs(r.aggregated_scores.mean_score - 11 / 3) < 1e-9);
    assert.ok(
      Math.abs(
        r.aggregated_scores.std_score - Math.sqrt(((2 - 11 / 3) ** 2 + (4 - 11 / 3) ** 2 + (5 - 11 / 3) ** 2) / 3),
      ) < 1e-9,
    );
    assert.equal(r.aggregated_scores.pass_percentage, 66.67);
    assert.equal(r.invalid_score_count, 1);
    assert.equal(r.generation_fail_count, 0);
    // Four rows, four generations by the endpoint's model server.
    assert.equal((await modelServerRequests(p, model)) - generationsBefore, 4);
    const results = await resultRows(r.result_file_id as string);
    assert.ok(results.every((x) => typeof x.model_to_evaluate_generation === 'string'));
    // The generations' tokens are billed to the project as this evaluation's usage (the judge is
    // external: its tokens are the user's own provider's).
    await setBillingUsageEnabled(p.db, tenant.organizationId, true);
    const billed = await eventually(
      async () =>
        (await call(p.baseUrl, 'GET', '/v1/billing/usage?granularity=hourly', { key: tenant.key })).body.data
          .flatMap((w: { line_items: unknown[] }) => w.line_items)
          .filter((i: { attributes: { resource_id: string } }) => i.attributes.resource_id === created.workflow_id),
      (items: { product_name: string; quantity: string }[]) => items.length === 2,
    );
    assert.deepEqual(billed.map((i: { product_name: string }) => i.product_name).sort(), [
      'Evaluations - Input Tokens',
      'Evaluations - Output Tokens',
    ]);
    assert.ok(billed.every((i: { quantity: string }) => Number(i.quantity) > 0));
  });

  test('compare two columns with position-bias correction: wins when both orders agree, ties otherwise', async () => {
    const file = await upload([
      { a: 'WIN here', b: 'plain' }, // A in both orders
      { a: 'plain', b: 'WIN here' }, // B in both orders
      { a: 'WIN', b: 'WIN' }, // each order picks its first: they disagree, a tie
      { a: 'plain', b: 'plain' }, // Tie both times
    ]);
    const created = await client.evals.create({
      type: 'compare',
      parameters: {
        input_data_file_path: file,
        judge: externalJudge('Which is better?'),
        model_a: 'a',
        model_b: 'b',
      },
    });
    const job = await ended(created.workflow_id!, 'compare-completed');
    assert.equal(job.status, 'completed', JSON.stringify(job));
    const r = job.results as Record<string, unknown>;
    assert.deepEqual([r.A_wins, r.B_wins, r.Ties, r.judge_fail_count], [1, 1, 2, 0]);
  });

  test('a column no row has ends user_error before any call', async () => {
    const file = await upload([{ q: 'x' }]);
    const before = calls.length;
    const created = await client.evals.create({
      type: 'classify',
      parameters: {
        input_data_file_path: file,
        judge: externalJudge('MARK:good'),
        labels: ['good', 'bad'],
        pass_labels: ['good'],
        model_to_evaluate: 'answer',
      },
    });
    const job = await ended(created.workflow_id!, 'user-error-missing-column');
    assert.equal(job.status, 'user_error');
    assert.match(String((job.results as { error?: string }).error), /column 'answer'/);
    assert.equal(calls.length, before);
  });

  test('bad input is a 400 naming the field; another project finds nothing', async () => {
    const file = await upload([{ q: 'x', answer: 'y' }]);
    const classify = (over: Record<string, unknown>) => ({
      type: 'classify',
      parameters: {
        input_data_file_path: file,
        judge: externalJudge('MARK:good'),
        labels: ['good', 'bad'],
        pass_labels: ['good'],
        model_to_evaluate: 'answer',
        ...over,
      },
    });
    const post = (body: object) => call(p.baseUrl, 'POST', '/v1/evaluation', { key: tenant.key, json: body });
    const cases: [object, string][] = [
      [classify({ pass_labels: ['great'] }), 'parameters.pass_labels'],
      [classify({ judge: externalJudge('{% if %}') }), 'parameters.judge.system_template'],
      [
        classify({ judge: { ...externalJudge('x'), external_api_token: undefined } }),
        'parameters.judge.external_api_token',
      ],
      [
        classify({ input_data_file_path: 'file-00000000-0000-0000-0000-000000000000' }),
        'parameters.input_data_file_path',
      ],
      [
        {
          type: 'score',
          parameters: {
            input_data_file_path: file,
            judge: externalJudge('x'),
            min_score: 5,
            max_score: 1,
            pass_threshold: 3,
          },
        },
        'parameters.max_score',
      ],
    ];
    for (const [body, param] of cases) {
      const res = await post(body);
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.equal(res.body.error.param, param, JSON.stringify(res.body));
    }
    const res = await post(classify({ labels: undefined }));
    assert.equal(res.status, 400);
    assert.match(res.body.error.param, /labels/);

    const created = await client.evals.create(classify({}) as never);
    const other = await createTenant(p.db);
    const seen = await call(p.baseUrl, 'GET', `/v1/evaluation/${created.workflow_id}`, { key: other.key });
    assert.equal(seen.status, 404);
    await ended(created.workflow_id!);
  });
});
