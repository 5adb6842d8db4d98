/**
 * Attack: options smuggled into `podman run` through a deployment's fields.
 * The image is a positional after the options, and Podman reads options until
 * the first positional: an image of `--volume=/:/host` (with the real image as
 * the first of `args`) would mount the host's root into the container, one of
 * `--privileged` would drop its confinement. A mount path is the second part of
 * `--volume host:path:ro`, where a `:` or a `,` adds options.
 *
 * The attacker has one ordinary project key. The API refuses each such value
 * with a 400 naming the field, and no container of the attacker's is started;
 * a value stored before the API checked (a kept revision) is refused by the
 * rollback that would bring it back, and by the runtime.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';

import { recordRevision } from '../../db/deployment-revisions';
import { PodmanEngine } from '../../providers/containers/podman/podman-engine';
import { PodmanRuntime } from '../../providers/containers/podman/podman-runtime';
import { ReplicaNetworks } from '../../providers/containers/podman/replica-networks';
import { ReplicaFailed, type ReplicaToLaunch } from '../../providers/containers/runtime';
import type { DeploymentSpec } from '../../shared/deployments';
import { call, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';
import { podmanOf } from '../helpers/podman-platform';

let p: TestPlatform;
let attacker: Tenant;

before(async () => {
  p = await startTestPlatform({ containerRuntime: 'podman' });
  attacker = await createTenant(p.db);
});
after(() => p?.stop());

const api = (method: string, url: string, json?: unknown) =>
  call(p.baseUrl, method, `/v1${url}`, { key: attacker.key, json });
const IMAGE = 'registry.example.test/team/app:1';
const spec = (fields: Record<string, unknown>) => ({
  name: 'smuggler',
  image: IMAGE,
  gpu_type: 'h100-80gb',
  port: 8080,
  min_replicas: 1,
  ...fields,
});
function attackersContainers(): string {
  return podmanOf(p.config.dataDir)([
    'ps',
    '--all',
    '--filter',
    `label=gantry.project=${attacker.projectId}`,
    '--format',
    '{{.Names}} {{.Image}}',
  ]).trim();
}

test('an image or mount path that Podman would read as options is refused, naming the field', async () => {
  for (const image of ['--volume=/:/host', '--privileged', '-v=/:/host', `${IMAGE} --privileged`, ` ${IMAGE}`]) {
    const res = await api('POST', '/deployments', spec({ image, args: [IMAGE] }));
    assert.equal(res.status, 400, `${image}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.error.param, 'image', image);
  }
  // A change of image to one, on a deployment made with a real one (no replica: nothing to pull).
  const made = await api('POST', '/deployments', spec({ min_replicas: 0 }));
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const patched = await api('PATCH', '/deployments/smuggler', { image: '--privileged', args: [IMAGE] });
  assert.equal(patched.status, 400, JSON.stringify(patched.body));
  assert.equal(patched.body.error.param, 'image');
  // Nor a rollback to a revision kept from before the API checked images.
  const { rows } = await p.db.query<{ spec: DeploymentSpec }>(
    'SELECT spec FROM deployment_revisions WHERE deployment_id = $1 AND revision = 1',
    [made.body.id],
  );
  await recordRevision(p.db, {
    deploymentId: made.body.id,
    revision: 2,
    spec: { ...rows[0].spec, image: '--privileged' },
  });
  const rolledBack = await api('POST', '/deployments/smuggler/rollback', { revision_identifier: '2' });
  assert.equal(rolledBack.status, 400, JSON.stringify(rolledBack.body));
  assert.equal(rolledBack.body.error.param, 'revision_identifier');

  for (const mountPath of ['/data:/host', '/data:rw', '/data,rw', '/data/../../host']) {
    const volumes = await api('POST', '/deployments', spec({ volumes: [{ name: 'v', mount_path: mountPath }] }));
    assert.equal(volumes.status, 400, `${mountPath}: ${JSON.stringify(volumes.body)}`);
    assert.equal(volumes.body.error.param, 'volumes[0].mount_path');
    const models = await api(
      'POST',
      '/deployments',
      spec({ model_mounts: [{ model_id: 'm', mount_path: mountPath }] }),
    );
    assert.equal(models.status, 400, `${mountPath}: ${JSON.stringify(models.body)}`);
    assert.equal(models.body.error.param, 'model_mounts[0].mount_path');
  }

  // Only the deployment with the real image exists, and none of the attacker's containers.
  const listed = (await api('GET', '/deployments')).body.data as Array<{ name: string; image: string }>;
  assert.deepEqual(
    listed.map((d) => [d.name, d.image]),
    [['smuggler', IMAGE]],
  );
  assert.equal(attackersContainers(), '');
});

test('a launch whose image or mount path was stored unchecked fails before Podman runs it', async () => {
  const state = mkdtempSync(path.join(tmpdir(), 'gantry-podman-'));
  try {
    const engine = new PodmanEngine(state);
    const runtime = new PodmanRuntime(path.join(state, 'logs'), engine, new ReplicaNetworks(engine), {
      limits: { defaults: p.config.replicaDefaultLimits, max: p.config.replicaMaxLimits },
    });
    const replica: ReplicaToLaunch = {
      deploymentId: 'dep-stored',
      projectId: attacker.projectId,
      replicaId: 'dep-stored-1',
      image: IMAGE,
      command: [],
      args: [IMAGE],
      containerPort: 8080,
      env: {},
      healthPath: '/health',
      healthTimeoutMs: 5000,
      mounts: [],
    };
    await assert.rejects(
      runtime.launch({ ...replica, image: '--volume=/:/host' }, () => undefined),
      (err: Error) => err instanceof ReplicaFailed && /is not an image reference/.test(err.message),
    );
    await assert.rejects(
      runtime.launch({ ...replica, mounts: [{ hostDir: state, mountPath: '/data:/host:rw' }] }, () => undefined),
      (err: Error) => err instanceof ReplicaFailed && /cannot be mounted/.test(err.message),
    );
    assert.equal(attackersContainers(), '');
  } finally {
    rmSync(state, { recursive: true, force: true });
  }
});
