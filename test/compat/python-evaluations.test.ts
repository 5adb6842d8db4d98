/**
 * Evaluations with the official Python CLI (`together evals create|list|get|status`) and SDK
 * (`client.evals`), PyPI `together` pinned, against a real stack. The judge is an external
 * OpenAI-compatible server the test runs (test/helpers/rule-judge.ts): its verdicts follow a rule,
 * so the counts are known from the file.
 */
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { pythonSdk, together, togetherJson, type PythonClient } from '../helpers/python-sdk';
import { JUDGE_TOKEN, startRuleJudge, type JudgeCall } from '../helpers/rule-judge';
import { createTenant, type Tenant } from '../helpers/tenants';

describe('official Python CLI and SDK: evaluations', () => {
  let p: TestPlatform;
  let t: Tenant;
  let cli: PythonClient;
  let judge: Server;
  let judgeUrl: string;
  const calls: JudgeCall[] = [];
  const dir = mkdtempSync(path.join(tmpdir(), 'gantry-py-evals-'));
  const ended = (id: string) =>
    eventually(
      () => call(p.baseUrl, 'GET', `/v1/evaluation/${id}`, { key: t.key }),
      (r) => ['completed', 'error', 'user_error'].includes(r.body.status),
      60_000,
    );

  before(async () => {
    p = await startTestPlatform({ env: { GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' } });
    t = await createTenant(p.db);
    cli = { baseUrl: p.baseUrl, key: t.key, cwd: dir };
    judge = await startRuleJudge(calls);
    judgeUrl = `http://127.0.0.1:${(judge.address() as AddressInfo).port}/v1`;
  });
  after(async () => {
    judge.close();
    await p.stop();
  });

  test('CLI: create a classify evaluation from a local file, list, get, status', async () => {
    const rows = [
      { q: 'a', answer: 'x', mark: 'good' },
      { q: 'b', answer: 'y', mark: 'bad' },
      { q: 'c', answer: 'z', mark: 'good' },
    ];
    writeFileSync(path.join(dir, 'rows.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const created = await togetherJson(
      cli,
      'evals',
      'create',
      '--type',
      'classify',
      '--judge-model',
      'judge-1',
      '--judge-model-source',
      'external',
      '--judge-system-template',
      'Judge {{ q }}. MARK:{{ mark }}',
      '--judge-external-base-url',
      judgeUrl,
      '--judge-external-api-token',
      JUDGE_TOKEN,
      '--input-data-file-path',
      './rows.jsonl',
      '--model-field',
      'answer',
      '--labels',
      'good,bad',
      '--pass-labels',
      'good',
    );
    const id: string = created.workflow_id;
    assert.equal(created.status, 'pending');
    await ended(id);
    const listed = await togetherJson(cli, 'evals', 'list');
    assert.ok(listed.some((e: { workflow_id: string }) => e.workflow_id === id));
    const got = await togetherJson(cli, 'evals', 'get', id);
    assert.equal(got.status, 'completed');
    assert.deepEqual(JSON.parse(got.results.label_counts), { good: 2, bad: 1 });
    assert.equal(got.results.pass_percentage, 66.67);
    assert.match(await together(cli, 'evals', 'status', id), /completed/);
  });

  test('SDK: create a compare evaluation, retrieve, status, list by status', async () => {
    const file = await pythonSdk(
      cli,
      `
import json, pathlib
from together import Together
client = Together()
path = pathlib.Path("pairs.jsonl")
path.write_text("\\n".join(json.dumps(r) for r in [{"a": "WIN", "b": "no"}, {"a": "no", "b": "WIN"}, {"a": "no", "b": "WIN"}]) + "\\n")
f = client.files.upload(file=path, purpose="eval", check=False)
print(json.dumps({"id": f.id}))
`,
    );
    const created = await pythonSdk(
      cli,
      `
import json
from together import Together
client = Together()
r = client.evals.create(type="compare", parameters={
    "input_data_file_path": ${JSON.stringify(file.id)},
    "judge": {"model": "judge-1", "model_source": "external", "system_template": "Which is better?",
              "external_base_url": ${JSON.stringify(judgeUrl)}, "external_api_token": ${JSON.stringify(JUDGE_TOKEN)}},
    "model_a": "a", "model_b": "b"})
print(json.dumps({"id": r.workflow_id, "status": r.status}))
`,
    );
    assert.equal(created.status, 'pending');
    await ended(created.id);
    const seen = await pythonSdk(
      cli,
      `
import json
from together import Together
client = Together()
job = client.evals.retrieve(${JSON.stringify(created.id)})
status = client.evals.status(${JSON.stringify(created.id)})
done = [e.workflow_id for e in client.evals.list(status="completed")]
print(json.dumps({"type": job.type, "a": job.results.a_wins, "b": job.results.b_wins, "ties": job.results.ties,
                  "status": status.status, "listed": job.workflow_id in done}))
`,
    );
    assert.deepEqual(seen, { type: 'compare', a: 1, b: 2, ties: 0, status: 'completed', listed: true });
  });
});
