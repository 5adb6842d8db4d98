/**
 * The PyTorch model server on the podman runtime: an endpoint of HuggingFaceTB/SmolLM2-135M-Instruct
 * runs from the torch server's image (scripts/build-model-server-image.ts --torch,
 * GANTRY_TORCH_MODEL_SERVER_IMAGE) in a container of its own, reads the catalog base's installed
 * weights from a read-only mount of the model directory's entry, and answers through the gateway.
 */
import assert from 'node:assert/strict';
import { readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { PodmanEngine } from '../../providers/containers/podman/podman-engine';
import { buildModelServerImage, TORCH_SERVER_IMAGE } from '../../scripts/build-model-server-image';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { podmanOf } from '../helpers/podman-platform';

const ROOT = path.resolve(__dirname, '../..');
const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
let p: TestPlatform;
let t: Tenant;
let image: string;

before(async () => {
  const dataDir = process.env.GANTRY_DATA_DIR ?? path.join(ROOT, '.data');
  image = await buildModelServerImage(new PodmanEngine(path.join(dataDir, 'podman')), TORCH_SERVER_IMAGE);
  p = await startTestPlatform({ containerRuntime: 'podman', env: { GANTRY_TORCH_MODEL_SERVER_IMAGE: image } });
  t = await createTenant(p.db);
});
after(async () => {
  await p?.stop();
});

const v2 = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}${url}`, { key: t.key, json });

// Its own time limit, above the runner's 5 minutes: on a fresh machine the first replica's launch
// brings the 4.6 GB image into the container host's storage.
test(
  'an endpoint of SmolLM2 serves from the torch image in a container, its weights mounted read-only',
  { timeout: 900_000 },
  async () => {
    assert.equal((await v2('POST', '/endpoints', { name: 'smol' })).status, 200);
    const created = await v2('POST', '/endpoints/smol/deployments', {
      name: 'base',
      modelId: MODEL,
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const ready = await eventually(
      () => v2('GET', '/endpoints/smol/deployments/base').then((r) => r.body),
      (d) => d.status.readyReplicas === 1 || d.status.state === 'DEPLOYMENT_STATE_FAILED',
      600_000,
    );
    assert.equal(ready.status.readyReplicas, 1, JSON.stringify(ready.status));

    // The replica is a container of the torch server's image, under ids of its own, and the
    // catalog base is the model directory's entry, read-only.
    const podman = (args: string[]) => podmanOf(p.config.dataDir)(args).trim();
    const [container] = podman([
      'ps',
      '--filter',
      `label=gantry.project=${t.projectId}`,
      '--format',
      '{{.Names}} {{.Image}}',
    ]).split('\n');
    assert.ok(container?.endsWith(image), container);
    const name = container.split(' ')[0];
    const pid = podman(['inspect', name, '--format', '{{.State.Pid}}']);
    assert.notEqual(readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/)[1], '0');
    const mounts = JSON.parse(podman(['inspect', name, '--format', '{{json .Mounts}}'])) as Array<{
      Source: string;
      Destination: string;
      RW: boolean;
    }>;
    const base = mounts.find((m) => m.Destination === '/base');
    const entry = path.join(p.config.modelDir, MODEL);
    assert.ok(base && [entry, realpathSync(entry)].includes(base.Source), JSON.stringify(mounts));
    assert.equal(base.RW, false);

    const answer = await call(p.gatewayUrl, 'POST', '/v1/chat/completions', {
      key: t.key,
      json: {
        model: `${t.projectSlug}/smol`,
        messages: [{ role: 'user', content: 'What is the capital of France?' }],
        max_tokens: 30,
        temperature: 0,
      },
    });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.match(answer.body.choices[0].message.content, /Paris/);
    assert.equal(answer.body.choices[0].finish_reason, 'stop');
  },
);
