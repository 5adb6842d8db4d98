/**
 * The official SDK against Gantry's dedicated inference and speech, changing
 * nothing but baseURL, apiKey and projectID: beta.models.configs,
 * beta.endpoints (with a deployment), beta.endpoints.rollouts (preview, create,
 * list, retrieve, start, pause, resume, promote, cancel, delete), models.list,
 * audio.transcriptions and audio.translations (the SDK's own multipart,
 * arrays as `key[]`).
 */
import assert from 'node:assert/strict';
import { createReadStream, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Together } from 'together-ai';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { speak, wordErrorRate } from '../helpers/speech';
import { createTenant, type Tenant } from '../helpers/tenants';

const BASE = 'gantry/reference-byte-tiny';

describe('official SDK: endpoints, rollouts, configs, models, audio', () => {
  let p: TestPlatform;
  let tenant: Tenant;
  let client: Together;
  const ids: Record<string, string> = {};

  before(async () => {
    p = await startTestPlatform({ speech: true, env: { GANTRY_ROLLOUT_BATCH_SOAK_SECONDS: '1' } });
    tenant = await createTenant(p.db);
    const { Together: SDK } = require('together-ai') as typeof import('together-ai');
    client = new SDK({ apiKey: tenant.key, baseURL: `${p.baseUrl}/v1`, projectID: tenant.projectId, maxRetries: 0 });
  });
  after(() => p.stop());

  test('configs, an endpoint with two deployments, and the catalog', async () => {
    const configs = [];
    for await (const c of client.beta.models.configs.list({ referenceModelId: BASE })) configs.push(c);
    assert.deepEqual(
      configs.map((c) => c.id),
      ['cr_reference-byte-tiny-fp32'],
    );
    const config = await client.beta.models.configs.retrieve('cr_reference-byte-tiny-fp32');
    // The catalog model's id in resource names: no `/`.
    assert.equal(config.referenceModelId, 'gantry--reference-byte-tiny');
    assert.equal(config.referenceModel, 'projects/public/models/gantry--reference-byte-tiny');

    const endpoint = await client.beta.endpoints.create({ name: 'sdk' });
    ids.endpoint = endpoint.id;
    for (const name of ['one', 'two']) {
      const d = await client.beta.endpoints.deployments.create(endpoint.id, {
        name,
        modelId: BASE,
        autoscaling: { minReplicas: 1, maxReplicas: 1 },
      });
      ids[name] = d.id;
    }
    await eventually(
      async () => {
        const list = [];
        for await (const d of client.beta.endpoints.deployments.list(endpoint.id)) list.push(d);
        return list;
      },
      (list) => list.length === 2 && list.every((d) => d.status.state === 'DEPLOYMENT_STATE_READY'),
      90_000,
    );
    const models = await client.models.list({ dedicated: true });
    assert.deepEqual(
      models.map((m) => m.id),
      [`${tenant.projectSlug}/sdk`],
    );
  });

  test('rollouts: preview, create, start, pause, resume, promote; a pending one cancelled away', async () => {
    const rollouts = client.beta.endpoints.rollouts;
    const preview = await rollouts.previewDefaults(ids.endpoint, {
      sourceDeploymentId: ids.one,
      targetDeploymentId: ids.two,
      canary: {},
    });
    assert.deepEqual(
      preview.estimatedEffectiveSteps?.map((s) => s.traffic),
      [5, 25, 50, 100],
    );
    const created = await rollouts.create(ids.endpoint, {
      sourceDeploymentId: ids.one,
      targetDeploymentId: ids.two,
      canary: { steps: [{ traffic: 50 }, { traffic: 100 }], stepInterval: '600s' },
      finalSourceReplicas: 1,
    });
    assert.equal(created.state, 'ROLLOUT_STATE_PENDING');
    const listed = [];
    for await (const r of rollouts.list(ids.endpoint, { filter: 'ROLLOUT_FILTER_ACTIVE' })) listed.push(r.id);
    assert.deepEqual(listed, [created.id]);
    const started = await rollouts.start(created.id, { endpointId: ids.endpoint });
    assert.equal(started.state, 'ROLLOUT_STATE_RUNNING');
    await eventually(
      () => rollouts.retrieve(created.id, { endpointId: ids.endpoint }),
      (r) => r.currentTrafficPercent === 50,
      30_000,
    );
    const pausing = await rollouts.pause(created.id, { endpointId: ids.endpoint, reason: 'sdk check' });
    assert.ok(['ROLLOUT_STATE_PAUSING', 'ROLLOUT_STATE_PAUSED'].includes(pausing.state));
    await eventually(
      () => rollouts.retrieve(created.id, { endpointId: ids.endpoint }),
      (r) => r.state === 'ROLLOUT_STATE_PAUSED',
      30_000,
    );
    const resumed = await rollouts.resume(created.id, { endpointId: ids.endpoint });
    assert.equal(resumed.state, 'ROLLOUT_STATE_RUNNING');
    await rollouts.promote(created.id, { endpointId: ids.endpoint });
    const done = await eventually(
      () => rollouts.retrieve(created.id, { endpointId: ids.endpoint }),
      (r) => r.state === 'ROLLOUT_STATE_COMPLETED',
      30_000,
    );
    assert.equal(done.currentTrafficPercent, 100);
    assert.deepEqual(
      done.status.steps.map((s) => s.state),
      ['ROLLOUT_STEP_STATE_SKIPPED', 'ROLLOUT_STEP_STATE_SKIPPED'],
    );
    const endpoint = await client.beta.endpoints.retrieve(ids.endpoint);
    assert.deepEqual(endpoint.trafficSplit, [{ deploymentId: ids.two, weight: 100 }]);

    // A pending blue-green rollout: cancel is refused (nothing runs yet); delete removes it.
    const back = await rollouts.create(ids.endpoint, {
      sourceDeploymentId: ids.two,
      targetDeploymentId: ids.one,
      blueGreen: {},
      finalTargetReplicas: 1,
    });
    await assert.rejects(
      rollouts.cancel(back.id, { endpointId: ids.endpoint, reason: 'not started' }),
      (err: { status?: number }) => err.status === 409,
    );
    await rollouts.delete(back.id, { endpointId: ids.endpoint });
    await assert.rejects(
      rollouts.retrieve(back.id, { endpointId: ids.endpoint }),
      (err: { status?: number }) => err.status === 404,
    );
  });

  test('audio: transcription with word timings, translation, through the SDK', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'gantry-sdk-audio-'));
    const wav = path.join(dir, 'hello.wav');
    const text = 'Please call the office tomorrow morning to confirm your appointment.';
    await speak(wav, [{ text, voice: 'en-us' }], path.join(dir, 'hello.json'));
    const verbose = (await client.audio.transcriptions.create({
      file: createReadStream(wav),
      model: 'openai/whisper-tiny.en' as 'openai/whisper-large-v3',
      response_format: 'verbose_json',
      timestamp_granularities: ['word', 'segment'],
    })) as { text: string; words?: Array<{ word: string; start: number; end: number }>; segments: unknown[] };
    assert.ok(wordErrorRate(text, verbose.text) < 0.25, verbose.text);
    assert.ok(verbose.words && verbose.words.length >= 8, 'the array of granularities arrived as two');
    assert.ok(verbose.segments.length >= 1);
    const plain = await client.audio.transcriptions.create({
      file: createReadStream(wav),
      model: 'openai/whisper-tiny.en' as 'openai/whisper-large-v3',
    });
    assert.deepEqual(Object.keys(plain), ['text']);

    const german = path.join(dir, 'german.wav');
    await speak(
      german,
      [{ text: 'Ich komme aus Deutschland und ich trinke gern Kaffee.', voice: 'de' }],
      path.join(dir, 'de.json'),
    );
    const translated = await client.audio.translations.create({
      file: createReadStream(german),
      model: 'openai/whisper-base' as 'openai/whisper-large-v3',
    });
    assert.match((translated as { text: string }).text.toLowerCase(), /germany/);
    // The SDK's `language`, "target output language": on from English into Spanish.
    const spanish = (await client.audio.translations.create({
      file: createReadStream(german),
      model: 'openai/whisper-base' as 'openai/whisper-large-v3',
      language: 'es',
      response_format: 'verbose_json',
    })) as { text: string; language: string };
    assert.equal(spanish.language, 'es');
    assert.match(spanish.text.toLowerCase(), /alemania/);
  });
});
