/**
 * Dedicated endpoints on the podman runtime: the model server runs from its image
 * (scripts/build-model-server-image.ts, GANTRY_MODEL_SERVER_IMAGE) in a container of its own,
 * reads the registry revision it serves from its `/model` mount, and loads an adapter attached
 * later from its deployment's adapter mount, as an unprivileged id of its own user namespace.
 * The weights are the reference model's, written by its own code (init_params, init_lora) with a
 * LoRA B that is not zero, so the adapter changes the answer.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { PodmanEngine } from '../../providers/containers/podman/podman-engine';
import { buildModelServerImage } from '../../scripts/build-model-server-image';
import { storeValidatedRevision } from '../helpers/models';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { podmanOf } from '../helpers/podman-platform';

const ROOT = path.resolve(__dirname, '../..');
let p: TestPlatform;
let t: Tenant;
let image: string;
let weights: string;

/** A model's and an adapter's files for the reference byte model, made by the trainer's own code. */
const MAKE_WEIGHTS = `
import json, os, sys
import numpy as np
from gantry_trainer.checkpoint import save_params
from gantry_trainer.lora import init_lora
from gantry_trainer.model import ModelConfig, init_params
out = sys.argv[1]
model = {"vocab_size": 260, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "max_seq_len": 256}
cfg = ModelConfig.from_dict(model)
os.makedirs(f"{out}/model"); os.makedirs(f"{out}/adapter")
save_params(f"{out}/model/model.safetensors", init_params(cfg, 7))
json.dump({"model": model}, open(f"{out}/model/config.json", "w"))
lora = init_lora(cfg, ["q_proj", "v_proj"], 4, 1)
rng = np.random.default_rng(2)
lora = {k: (np.asarray(v) if k.endswith("lora_A") else rng.normal(0, 0.5, v.shape).astype(np.float32)) for k, v in lora.items()}
save_params(f"{out}/adapter/adapter.safetensors", lora)
json.dump({"model": model, "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}}, open(f"{out}/adapter/config.json", "w"))
`;

before(async () => {
  const dataDir = process.env.GANTRY_DATA_DIR ?? path.join(ROOT, '.data');
  image = await buildModelServerImage(new PodmanEngine(path.join(dataDir, 'podman')));
  weights = mkdtempSync(path.join(tmpdir(), 'gantry-reference-weights-'));
  execFileSync(path.join(ROOT, '.venv/bin/python'), ['-c', MAKE_WEIGHTS, weights], {
    env: { ...process.env, PYTHONPATH: path.join(ROOT, 'trainers/reference'), JAX_PLATFORMS: 'cpu' },
  });
  p = await startTestPlatform({
    containerRuntime: 'podman',
    env: { GANTRY_MODEL_SERVER_IMAGE: image, GANTRY_ADAPTER_RESYNC_SECONDS: '1' },
  });
  t = await createTenant(p.db);
});
after(async () => {
  await p?.stop();
  rmSync(weights, { recursive: true, force: true });
});

const v2 = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });
const ask = (model: string) =>
  call(p.gatewayUrl, 'POST', '/v1/completions', {
    key: t.key,
    json: { model, prompt: 'ping', max_tokens: 8, temperature: 0 },
  });
const files = (dir: string) =>
  Object.fromEntries(
    ['model.safetensors', 'adapter.safetensors', 'config.json'].flatMap((name) => {
      try {
        return [[name, readFileSync(path.join(weights, dir, name))]];
      } catch {
        return [];
      }
    }),
  );

test('an endpoint serves a registry model from its image in a container, and loads an adapter from its mount', async () => {
  const model = (
    await v2('POST', '/models', { baseModelId: 'gantry/reference-byte-tiny', name: 'pod-model', type: 'model' })
  ).body;
  await storeValidatedRevision(p, model.id, 'rv_pod_model', files('model'));
  const adapter = (
    await v2('POST', '/models', { baseModelId: 'gantry/reference-byte-tiny', name: 'pod-adapter', type: 'adapter' })
  ).body;
  await storeValidatedRevision(p, adapter.id, 'rv_pod_adapter', files('adapter'));

  assert.equal((await v2('POST', '/endpoints', { name: 'pod' })).status, 200);
  const created = await v2('POST', '/endpoints/pod/deployments', {
    name: 'tuned',
    modelId: model.id,
    autoscaling: { minReplicas: 1, maxReplicas: 1 },
    enableLora: true,
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const ready = await eventually(
    () => v2('GET', '/endpoints/pod/deployments/tuned').then((r) => r.body),
    (d) => d.status.state === 'DEPLOYMENT_STATE_READY' && d.status.readyReplicas === 1,
    180_000,
  );
  assert.equal(ready.modelRevisionId, 'rv_pod_model');

  // The replica is a container of the model server's image, under ids of its own.
  const podman = (args: string[]) => podmanOf(p.config.dataDir)(args).trim();
  const [container] = podman([
    'ps',
    '--filter',
    `label=gantry.project=${t.projectId}`,
    '--format',
    '{{.Names}} {{.Image}}',
  ]).split('\n');
  assert.ok(container?.endsWith(image), container);
  const pid = podman(['inspect', container.split(' ')[0], '--format', '{{.State.Pid}}']);
  assert.notEqual(readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/)[1], '0');

  const base = await ask(`${t.projectSlug}/pod`);
  assert.equal(base.status, 200, JSON.stringify(base.body));

  const adapters = '/endpoints/pod/deployments/tuned/adapters';
  const attached = await v2('POST', adapters, { adapterModelId: adapter.id });
  assert.equal(attached.status, 200, JSON.stringify(attached.body));
  const loaded = await eventually(
    () => v2('GET', `${adapters}/${adapter.id}`).then((r) => r.body),
    (a) => ['ADAPTER_LOAD_STATE_READY', 'ADAPTER_LOAD_STATE_FAILED'].includes(a.perCluster[0]?.state),
    60_000,
  );
  assert.deepEqual(
    [loaded.perCluster[0].state, loaded.perCluster[0].readyPodCount, loaded.perCluster[0].totalPodCount],
    ['ADAPTER_LOAD_STATE_READY', 1, 1],
    JSON.stringify(loaded.perCluster[0]),
  );
  const withAdapter = await ask(`${t.projectSlug}/pod:${adapter.id}`);
  assert.equal(withAdapter.status, 200, JSON.stringify(withAdapter.body));
  assert.notEqual(withAdapter.body.choices[0].text, base.body.choices[0].text, 'the adapter changes the answer');
});
