/**
 * The full loop on this machine: upload data, fine-tune the reference model,
 * deploy the result behind an endpoint (scaled to zero until called), call it
 * through the inference gateway, and see the fine-tuned behaviour in the
 * answer, where the base model shows none of it. The first call wakes the
 * deployment and waits for its replica.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { insertRevision } from '../../db/models';
import { chat, jsonl } from '../helpers/datasets';
import { call, eventually, startTestPlatform, uploadValidated, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;

before(async () => {
  p = await startTestPlatform({
    env: {
      GANTRY_DEPLOYMENT_AUTOSCALE_INTERVAL_SECONDS: '1',
      GANTRY_DEPLOYMENT_AUTOSCALE_COOLDOWN_SECONDS: '1',
      GANTRY_ADAPTER_RESYNC_SECONDS: '1',
    },
  });
  t = await createTenant(p.db);
});
after(() => p.stop());

const v2 = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });
const ask = (model: string, content: string) =>
  call(p.gatewayUrl, 'POST', '/v1/chat/completions', {
    key: t.key,
    json: { model, messages: [{ role: 'user', content }], max_tokens: 12, temperature: 0 },
  });

describe('full loop: upload, fine-tune, deploy, call', () => {
  let adapterId = '';
  let adapterRevision = '';

  test('the fine-tuned model answers as it was taught; the base does not', async () => {
    const records = Array.from({ length: 64 }, (_, i) => chat(`ping ${i}`, 'pong!'));
    const file = await uploadValidated(p, t.key, 'ping.jsonl', jsonl(...records));
    const job = await call(p.baseUrl, 'POST', '/v1/fine-tunes', {
      key: t.key,
      json: {
        model: 'gantry/reference-byte-tiny',
        training_file: file,
        n_epochs: 8,
        learning_rate: 0.01,
        batch_size: 8,
        max_seq_length: 32,
        suffix: 'pong',
        random_seed: 1,
        training_type: { type: 'Lora', lora_r: 8, lora_alpha: 16 },
      },
    });
    assert.equal(job.status, 200, JSON.stringify(job.body));
    const done = await eventually(
      () => call(p.baseUrl, 'GET', `/v1/fine-tunes/${job.body.id}`, { key: t.key }).then((r) => r.body),
      (j) => ['completed', 'error', 'cancelled'].includes(j.status),
      180_000,
    );
    assert.equal(done.status, 'completed', JSON.stringify(done.events?.slice(-3)));
    assert.match(done.model_object_id, /^ml_/);
    adapterId = done.adapter_object_id;
    adapterRevision = done.adapter_object_revision_id;

    assert.equal((await v2('POST', '/endpoints', { name: 'pinger' })).status, 200);
    const tuned = await v2('POST', '/endpoints/pinger/deployments', {
      name: 'tuned',
      modelId: done.model_object_id,
      autoscaling: { minReplicas: 0, maxReplicas: 1 },
    });
    assert.equal(tuned.status, 200, JSON.stringify(tuned.body));
    assert.equal(tuned.body.modelRevisionId, done.model_object_revision_id);
    await eventually(
      () => v2('GET', `/endpoints/pinger/deployments/tuned`).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 0,
      60_000,
    );

    // Scaled to zero: the first call wakes a replica and waits for it.
    const started = Date.now();
    const answer = await ask(`${t.projectSlug}/pinger`, 'ping 99');
    const wakeMs = Date.now() - started;
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    const text = answer.body.choices[0].message.content as string;
    assert.equal(text, 'pong!', "the taught answer, ended at the chat template's line end");
    assert.equal(answer.body.choices[0].finish_reason, 'stop');
    console.log(
      `full loop: file ${file}, job ${done.id}, model ${done.model_object_id} (${done.model_object_revision_id}), ` +
        `endpoint ${t.projectSlug}/pinger, woke in ${wakeMs} ms, answer ${JSON.stringify(text)}, usage ${JSON.stringify(answer.body.usage)}`,
    );

    // The base model behind another endpoint, same question: not the taught answer.
    assert.equal((await v2('POST', '/endpoints', { name: 'base' })).status, 200);
    await v2('POST', '/endpoints/base/deployments', {
      name: 'base',
      modelId: 'gantry/reference-byte-tiny',
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
      enableLora: true,
    });
    await eventually(
      () => v2('GET', '/endpoints/base/deployments/base').then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
      60_000,
    );
    const base = await ask(`${t.projectSlug}/base`, 'ping 99');
    assert.equal(base.status, 200);
    assert.doesNotMatch(base.body.choices[0].message.content, /pong/);

    const events = (await v2('GET', '/endpoints/pinger/events')).body.data.map((e: { type: string }) => e.type);
    assert.ok(events.includes('deployment.scaled_to_zero') || events.includes('deployment.ready'));
    assert.ok(events.includes('deployment.replicas_changed'), `woken: ${events.join(', ')}`);
  });

  test("the job's LoRA adapter attached to the base deployment: loaded, used by name, moved by etag, detached", async () => {
    const adapters = '/endpoints/base/deployments/base/adapters';
    const attached = await v2('POST', adapters, { adapterModelId: adapterId });
    assert.equal(attached.status, 200, JSON.stringify(attached.body));
    assert.equal(attached.body.desiredRevisionId, adapterRevision);
    assert.equal(attached.body.adapterValid, true);
    const loaded = await eventually(
      () => v2('GET', `${adapters}/${adapterId}`).then((r) => r.body),
      (a) => a.perCluster[0].state === 'ADAPTER_LOAD_STATE_READY',
      30_000,
    );
    assert.deepEqual(
      [loaded.perCluster[0].readyPodCount, loaded.perCluster[0].failedPodCount, loaded.perCluster[0].totalPodCount],
      [1, 0, 1],
    );
    assert.equal(loaded.perCluster[0].realizedRevisionId, adapterRevision);
    assert.equal(loaded.perCluster[0].realizedEtag, loaded.etag);

    // The base deployment answers with the adapter applied when the adapter is named.
    const withAdapter = await ask(`${t.projectSlug}/base:${adapterId}`, 'ping 42');
    assert.equal(withAdapter.status, 200, JSON.stringify(withAdapter.body));
    assert.equal(withAdapter.body.choices[0].message.content, 'pong!');
    assert.doesNotMatch((await ask(`${t.projectSlug}/base`, 'ping 42')).body.choices[0].message.content, /pong/);
    assert.equal((await ask(`${t.projectSlug}/base:ml_unknown`, 'ping')).status, 404);

    // Optimistic concurrency: a stale etag is refused, the current one moves the revision.
    const stale = await v2('PATCH', `${adapters}/${adapterId}`, { adapterRevisionId: adapterRevision, etag: 'stale' });
    assert.equal(stale.status, 409);
    const moved = await v2('PATCH', `${adapters}/${adapterId}`, {
      adapterRevisionId: adapterRevision,
      etag: loaded.etag,
    });
    assert.equal(moved.status, 200);
    assert.notEqual(moved.body.etag, loaded.etag);
    const list = await v2('GET', `${adapters}?limit=1`);
    assert.deepEqual(
      list.body.data.map((a: { adapterModelId: string }) => a.adapterModelId),
      [adapterId],
    );

    // An adapter for another base is attached as invalid, with the reason, and never loaded.
    const foreign = (
      await v2('POST', '/models', { baseModelId: 'Qwen/Qwen3-8B', name: 'qwen-adapter', type: 'adapter' })
    ).body;
    await insertRevision(p.db, {
      id: 'rv_qwen_adapter',
      modelId: foreign.id,
      blobPrefix: `registry/${foreign.id}/rv_qwen_adapter`,
      files: [],
      validationStatus: 'REVISION_VALIDATION_STATUS_SUCCESS',
    });
    const invalid = await v2('POST', adapters, { adapterModelId: foreign.id });
    assert.equal(invalid.status, 200);
    assert.equal(invalid.body.adapterValid, false);
    assert.match(
      invalid.body.adapterValidReason,
      /trained on Qwen\/Qwen3-8B; this deployment serves gantry\/reference-byte-tiny/,
    );
    assert.equal((await v2('DELETE', `${adapters}/${foreign.id}?etag=${invalid.body.etag}`)).status, 200);

    const detach = await v2('DELETE', `${adapters}/${adapterId}?etag=${moved.body.etag}`);
    assert.equal(detach.status, 200);
    await eventually(
      () => v2('GET', `${adapters}/${adapterId}`).then((r) => r.status),
      (s) => s === 404,
      30_000,
    );
    assert.equal((await ask(`${t.projectSlug}/base:${adapterId}`, 'ping 42')).status, 404);
  });
});
