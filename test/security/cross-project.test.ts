/**
 * Another project's resources, as a tenant with an ordinary key of their own project tries them:
 * the victim (project B, another organization) holds one real resource of each kind, made through
 * the API; the attacker (project A) sends every route that names a resource in its path (taken
 * from the routes the API registered, so a new route fails this test until the table below says
 * which resource it names) with B's ids, in both spellings: B's project in the path, and A's own
 * project (and A's own parents: its endpoint, its cluster) with B's resource at the end. Then the
 * requests that name B's resources in a body or a query (the queue, multipart uploads, downloads,
 * a fine-tune's training file, a model to serve, the gateway).
 *
 * Every one answers 404, the answer for an id that exists nowhere (a 403 would say that it exists),
 * and afterwards B reads each resource as it was: nothing renamed, nothing deleting, every key,
 * member and queue job still there.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { RegisteredRoute } from '../../api/route';
import { safetensorsFile } from '../helpers/archives';
import { clusterBody, FAST_CLUSTERS, waitForCluster } from '../helpers/clusters';
import { chat, jsonl } from '../helpers/datasets';
import { HTTP_REPLICA } from '../helpers/deployments';
import {
  call,
  eventually,
  startTestPlatform,
  uploadValidated,
  type HttpResult,
  type TestPlatform,
} from '../helpers/platform';
import { uploadBatchInput } from '../helpers/reference-endpoint';
import { createTenant, type Tenant } from '../helpers/tenants';

/** What an attacker writes where a name or a description goes: B's resources must not show it. */
const MARK = 'pwned';

let p: TestPlatform;
let a: Tenant;
let b: Tenant;
let weights: Server;
/** The installation's operator: deployment profiles of one project are theirs to make. */
let operator: Tenant;

/** The ids of one project's resources, one of each kind. */
interface Holdings {
  tenant: Tenant;
  file: string;
  fineTune: string;
  deployment: string;
  volume: string;
  secret: string;
  cluster: string;
  instance: string;
  remediation: string;
  clusterVolume: string;
  model: string;
  upload: string;
  endpoint: string;
  endpointName: string;
  endpointDeployment: string;
  rollout: string;
  config: string;
  /** A second key of the project (the one the project's own requests do not use). */
  apiKey: string;
  /** A multipart file upload left open. */
  multipartUpload: string;
  /** A model file upload (the CLI's protocol) left open. */
  modelFileUpload: string;
  queueJob: string;
  /** An invitation into the project's organization, to an address of nobody here. */
  invitation: string;
  /** A batch and an evaluation of the project's (their calls fail: nothing serves here; they exist). */
  batch: string;
  evaluation: string;
}
let A: Holdings;
let B: Holdings;

before(async () => {
  // No container host and no GPU worker: deployments and fine-tunes wait for one, which is enough
  // for them to exist (and cheaper than running them).
  p = await startTestPlatform({
    containers: false,
    gpuTypes: [],
    queueWaitSeconds: 600,
    env: { ...FAST_CLUSTERS, GANTRY_REMOTE_FETCH_ALLOW_PRIVATE: 'true' },
  });
  // The attacker holds every role an ordinary key can hold in its own project and organization, so
  // that what refuses them is ownership, not their role.
  a = await createTenant(p.db, { projectRole: 'Admin', organizationRole: 'Admin' });
  // (An organization admin, so that it holds an invitation of its organization's.)
  b = await createTenant(p.db, { organizationRole: 'Admin' });
  operator = await createTenant(p.db, { platformAdmin: true });
  const body = safetensorsFile();
  weights = createServer((_req, res) => res.writeHead(200, { 'content-length': body.length }).end(body));
  await new Promise<void>((r) => weights.listen(0, '127.0.0.1', r));
  // A's own resources too: the attacker's parents (its endpoint, its cluster) with B's leaf ids.
  [A, B] = await Promise.all([holdingsOf(a), holdingsOf(b)]);
});
after(async () => {
  weights?.close();
  await p.stop();
});

async function ok(res: Promise<{ status: number; body: any }>, what: string): Promise<any> {
  const r = await res;
  if (r.status !== 200 && r.status !== 201) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** One resource of each kind in `t`'s project, through the API as its owner makes them. */
async function holdingsOf(t: Tenant): Promise<Holdings> {
  const v1 = (method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v1${path}`, { key: t.key, json });
  const v2 = (method: string, path: string, json?: unknown) =>
    call(p.baseUrl, method, `/v2/projects/${t.projectId}${path}`, { key: t.key, json });

  const records = Array.from({ length: 16 }, (_, i) => chat(`What is ${i} + 2?`, `${i + 2}.`));
  const file = await uploadValidated(p, t.key, 'train.jsonl', jsonl(...records));
  const fineTune = await ok(
    v1('POST', '/fine-tunes', { model: 'gantry/reference-byte-tiny', training_file: file, suffix: 'mine' }),
    'fine-tune',
  );
  const secret = await ok(v1('POST', '/deployments/secrets', { name: 'token', value: 'their-secret' }), 'secret');
  const volume = await ok(
    v1('POST', '/deployments/storage/volumes', {
      name: 'assets',
      type: 'readOnly',
      content: { type: 'files', source_prefix: 'train' },
    }),
    'volume',
  );
  // Both projects name their deployment `web`: a name is only ever looked up in the key's project.
  const deployment = await ok(
    v1('POST', '/deployments', {
      name: 'web',
      image: 'example/http-replica:1',
      gpu_type: 'h100-80gb',
      command: [process.execPath, HTTP_REPLICA],
      min_replicas: 1,
      environment_variables: [{ name: 'TOKEN', value_from_secret: 'token' }],
      volumes: [{ name: 'assets', mount_path: '/assets' }],
    }),
    'deployment',
  );
  const cluster = await ok(v1('POST', '/compute/clusters', clusterBody({ num_gpus: 8 })), 'cluster');
  const clusterVolume = await ok(
    v1('POST', '/compute/clusters/storage/volumes', { region: 'sim-us-east-1', size_tib: 1, volume_name: 'data' }),
    'cluster volume',
  );
  // Its first GPU node, once the simulated fleet has one (its acceptance tests wait for a GPU host).
  const booted = await waitForCluster(p, t.key, cluster.cluster_id, (c) => c.gpu_worker_nodes?.[0]?.instance_id);
  const instance = booted.gpu_worker_nodes[0].instance_id as string;
  const remediation = await ok(
    v1('POST', `/compute/clusters/${cluster.cluster_id}/instances/${instance}/remediations`, {
      mode: 'REMEDIATION_MODE_VM_ONLY',
      reason: 'mine',
    }),
    'remediation',
  );

  const model = await ok(
    v2('POST', '/models', { baseModelId: 'gantry/reference-byte-tiny', name: 'mine', type: 'model' }),
    'model',
  );
  const upload = await ok(
    v2('POST', '/models/uploads', {
      modelId: model.id,
      remoteUrl: `http://127.0.0.1:${(weights.address() as AddressInfo).port}/w.safetensors`,
    }),
    'model upload',
  );
  await eventually(
    () => v2('GET', `/models/uploads/${upload.id}`).then((r) => r.body.status),
    (s) => s === 'REMOTE_UPLOAD_STATUS_SUCCEEDED',
  );
  const endpoint = await ok(v2('POST', '/endpoints', { name: 'chat' }), 'endpoint');
  const deployments = [];
  for (const name of ['blue', 'green'])
    deployments.push(
      await ok(
        v2('POST', `/endpoints/${endpoint.id}/deployments`, {
          name,
          modelId: 'gantry/reference-byte-tiny',
          autoscaling: { minReplicas: 1, maxReplicas: 1 },
        }),
        'endpoint deployment',
      ),
    );
  const rollout = await ok(
    v2('POST', `/endpoints/${endpoint.id}/rollouts`, {
      sourceDeploymentId: deployments[0].id,
      targetDeploymentId: deployments[1].id,
    }),
    'rollout',
  );
  const apiKey = await ok(v1('POST', '/api-keys', { name: 'second' }), 'api key');
  const multipart = await ok(
    v1('POST', '/files/multipart/initiate', {
      purpose: 'fine-tune',
      file_name: 'big.jsonl',
      file_size: 12 * 1024 * 1024,
      num_parts: 2,
    }),
    'multipart upload',
  );
  const modelFileUpload = await ok(
    v2('POST', '/models/upload/create', {
      objectId: model.id,
      files: [{ path: 'model.safetensors', hash: 'd41d8cd98f00b204e9800998ecf8427e', numParts: 1 }],
    }),
    'model file upload',
  );
  // Last: with a profile of its own, a deployment of the project would have to name one.
  const config = await ok(
    call(p.baseUrl, 'POST', '/v1/admin/configs', {
      key: operator.key,
      json: {
        referenceModelId: 'gantry/reference-byte-tiny',
        projectId: t.projectId,
        selectors: [{ key: 'dtype', value: 'bfloat16' }],
      },
    }),
    'config',
  );
  const queueJob = await ok(v1('POST', '/queue/submit', { model: 'web', payload: { mine: true } }), 'queue job');
  const invitation = await ok(
    v1('POST', '/organization/invitations', { email: `invitee-${t.projectSlug}@example.com`, role: 'Developer' }),
    'invitation',
  );
  const batchInput = await uploadBatchInput(p, t.key, [
    { custom_id: 'one', body: { model: `${t.projectSlug}/chat`, messages: [{ role: 'user', content: 'hi' }] } },
  ]);
  const batch = await ok(
    v1('POST', '/batches', { endpoint: '/v1/chat/completions', input_file_id: batchInput }),
    'batch',
  );
  const evalInput = await uploadBatchInput(p, t.key, [{ q: 'x', answer: 'y' }], 'eval');
  const evaluation = await ok(
    v1('POST', '/evaluation', {
      type: 'classify',
      parameters: {
        input_data_file_path: evalInput,
        judge: { model: `${t.projectSlug}/chat`, model_source: 'dedicated', system_template: 'Is it good?' },
        labels: ['good', 'bad'],
        pass_labels: ['good'],
        model_to_evaluate: 'answer',
      },
    }),
    'evaluation',
  );
  return {
    tenant: t,
    file,
    fineTune: fineTune.id,
    deployment: deployment.id,
    volume: volume.id,
    secret: secret.id,
    cluster: cluster.cluster_id,
    instance,
    remediation: remediation.id,
    clusterVolume: clusterVolume.volume_id,
    model: model.id,
    upload: upload.id,
    endpoint: endpoint.id,
    endpointName: endpoint.name,
    endpointDeployment: deployments[0].id,
    rollout: rollout.id,
    config: config.id,
    apiKey: apiKey.id,
    invitation: invitation.id,
    multipartUpload: multipart.upload_id,
    modelFileUpload: modelFileUpload.uploadId,
    queueJob: queueJob.request_id,
    batch: batch.job.id,
    evaluation: evaluation.workflow_id,
  };
}

/**
 * Which resource each path parameter names, by the one or two segments before it (`files/{id}`: a file). A
 * route whose parameter is in neither list fails the test: say here what it names.
 */
type Kind = Exclude<keyof Holdings, 'tenant'> | 'projectId' | 'organizationId' | 'userId' | 'projectSlug';
const NAMED_BY: Record<string, Kind | ((h: Holdings) => string)> = {
  'projects/{projectId}': 'projectId',
  'organizations/{organizationId}': 'organizationId',
  'members/{userId}': 'userId',
  'api-keys/{keyId}': 'apiKey',
  'files/{id}': 'file',
  'fine-tunes/{id}': 'fineTune',
  'volumes/{volume_id}': 'clusterVolume',
  'clusters/{cluster_id}': 'cluster',
  'instances/{instance_id}': 'instance',
  'remediations/{remediation_id}': 'remediation',
  'storage/volumes/{id}': 'volume',
  'secrets/{id}': 'secret',
  'v1/deployments/{id}': 'deployment',
  // A deployment's revision is a number: the deployment before it is what is another project's.
  'revisions/{revision}': () => '1',
  'uploads/{id}': 'upload',
  'models/{id}': 'model',
  'configs/{id}': 'config',
  'endpoints/{id}': 'endpoint',
  'endpoints/{endpointId}': 'endpoint',
  'deployments/{id}': 'endpointDeployment',
  'deployments/{deploymentId}': 'endpointDeployment',
  // An adapter is named by its model's id: B's model (attached nowhere) is what A would name.
  'adapters/{id}': 'model',
  'rollouts/{id}': 'rollout',
  // The catalog's ids of a project's dedicated endpoints: `<project slug>/<endpoint name>`.
  'models/{org}': 'projectSlug',
  '{org}/{name}': (h) => h.endpointName,
  'organization/invitations/{invitationId}': 'invitation',
  'v1/invitations/{invitationId}': 'invitation',
  'v1/models/{name}': (h) => encodeURIComponent(`${h.tenant.projectSlug}/${h.endpointName}`),
  'batches/{id}': 'batch',
  'evaluation/{id}': 'evaluation',
};
/** Routes with a parameter in the path that name nothing of a project's. */
const NOT_A_PROJECTS = new Set([
  'GET /v2/supported-models/{id}', // the installation's catalog: the same for every project
]);

function idOf(h: Holdings, kind: Kind | ((h: Holdings) => string)): string {
  if (typeof kind === 'function') return kind(h);
  if (kind === 'projectId' || kind === 'organizationId' || kind === 'userId' || kind === 'projectSlug')
    return h.tenant[kind];
  return h[kind];
}

/** The route's parameters, each with what it names. */
function parametersOf(route: RegisteredRoute): Array<{ name: string; kind: Kind | ((h: Holdings) => string) }> {
  const segments = route.path.split('/');
  return segments.flatMap((segment, i) => {
    if (!segment.startsWith('{')) return [];
    const candidates = [segments.slice(Math.max(0, i - 2), i + 1).join('/'), `${segments[i - 1]}/${segment}`];
    const found = candidates.map((c) => NAMED_BY[c]).find((k) => k !== undefined);
    if (!found) throw new Error(`${route.method} ${route.path}: say in NAMED_BY what ${segment} names`);
    return [{ name: segment, kind: found }];
  });
}

/** What an attacker sends with each route that changes something: valid, so only ownership can refuse it. */
function attackBody(route: RegisteredRoute, h: Holdings): unknown {
  const bodies: Record<string, unknown> = {
    updateProject: { name: MARK },
    addProjectMember: { user_id: a.userId, role: 'Admin' },
    updateCluster: { num_gpus: 16 },
    createRemediation: { mode: 'REMEDIATION_MODE_VM_ONLY', reason: MARK },
    approveRemediation: { comment: MARK },
    rejectRemediation: { comment: MARK },
    updateDeploymentVolume: { name: MARK },
    updateDeploymentSecret: { value: MARK, description: MARK },
    updateDeployment: { description: MARK, min_replicas: 0 },
    rollbackDeployment: { revision_identifier: '1' },
    updateRegistryModel: { description: MARK },
    attachEndpointAdapter: { adapterModelId: h.model },
    updateEndpointAdapter: { adapterRevisionId: 'rv_x', etag: 'x' },
    createRollout: { sourceDeploymentId: h.endpointDeployment, targetDeploymentId: h.endpointDeployment },
    previewRolloutDefaults: { sourceDeploymentId: h.endpointDeployment, targetDeploymentId: h.endpointDeployment },
    pauseRollout: { reason: MARK },
    resumeRollout: {},
    promoteRollout: {},
    cancelRollout: { reason: MARK },
    updateEndpoint: { name: MARK },
    createEndpointDeployment: {
      name: MARK,
      modelId: 'gantry/reference-byte-tiny',
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
    },
    updateEndpointDeployment: { name: MARK },
    createModelUpload: { modelId: h.model, remoteUrl: 'http://127.0.0.1:1/x' },
    createModelFileUpload: {
      objectId: h.model,
      files: [{ path: 'model.safetensors', hash: 'd41d8cd98f00b204e9800998ecf8427e', numParts: 1 }],
    },
    completeModelFileUpload: {
      objectId: h.model,
      files: [{ path: 'model.safetensors', hash: 'd41d8cd98f00b204e9800998ecf8427e' }],
    },
    planModelDownload: { objectId: h.model },
    createRegistryModel: { baseModelId: 'gantry/reference-byte-tiny', name: MARK, type: 'model' },
    createEndpoint: { name: MARK },
  };
  if (route.method === 'get' || route.method === 'delete') return undefined;
  return bodies[route.operationId];
}

/** Queries some routes require (an etag where one is asked for). */
const QUERIES: Record<string, string> = { detachEndpointAdapter: '?etag=x' };

describe('cross-project access', () => {
  const routes = () =>
    p.routes.filter(
      (r) =>
        r.access === 'project' && r.path.includes('{') && !NOT_A_PROJECTS.has(`${r.method.toUpperCase()} ${r.path}`),
    );

  test("every route with an id in its path answers 404 to another project's key, and B's resources are as they were", async () => {
    const before = await victimsView();
    const tried: string[] = [];
    for (const route of routes()) {
      const params = parametersOf(route);
      // B's ids throughout; then the attacker's own parents with B's resource last (its own project,
      // endpoint or cluster, which it may use), where the route has more than the one.
      const spellings = [params.map(() => B)];
      const named = params.map((x, i) => (typeof x.kind === 'function' ? -1 : i));
      const leaf = Math.max(...named);
      if (params.length > 1 && leaf > 0) spellings.push(params.map((_, i) => (i === leaf ? B : A)));
      for (const [n, owners] of spellings.entries()) {
        const send = async (leafId?: string) => {
          let path = route.path;
          params.forEach((x, i) => {
            const id = i === leaf && leafId !== undefined ? leafId : idOf(owners[i], x.kind);
            path = path.replace(x.name, id);
          });
          path += QUERIES[route.operationId] ?? '';
          const json = attackBody(route, owners.at(-1)!);
          const res = await call(p.baseUrl, route.method.toUpperCase(), path, { key: a.key, json });
          return { res, what: `${route.operationId}: ${route.method.toUpperCase()} ${path} ${JSON.stringify(json)}` };
        };
        const { res, what } = await send();
        tried.push(what);
        if (n === 0) {
          assert.equal(res.status, 404, `${what} -> ${res.status} ${JSON.stringify(res.body)}`);
        } else {
          // In the attacker's own project (or endpoint, or cluster), B's id gets the answer an id
          // that exists nowhere gets: a refusal that says nothing of B.
          const nothing = (await send('nothing-here-0000')).res;
          assert.ok(res.status >= 400, `${what} -> ${res.status} ${JSON.stringify(res.body)}`);
          assert.deepEqual(
            [res.status, res.body.error?.code],
            [nothing.status, nothing.body.error?.code],
            `${what} -> ${res.status} ${JSON.stringify(res.body)}; for an id that exists nowhere: ${JSON.stringify(nothing.body)}`,
          );
        }
      }
    }
    assert.ok(tried.length > 80, `${tried.length} requests`);
    assert.deepEqual(await victimsView(), before, "B's resources after the attacks");
  });

  test("ids of B's in a body or a query get the answer an id that exists nowhere gets", async () => {
    const before = await victimsView();
    const v1 = (method: string, path: string, json?: unknown) =>
      call(p.baseUrl, method, `/v1${path}`, { key: a.key, json });
    const v2 = (method: string, path: string, json?: unknown) =>
      call(p.baseUrl, method, `/v2/projects/${a.projectId}${path}`, { key: a.key, json });
    const NOTHING = 'nothing-here-0000';
    // A's own usage report is on, so what answers the request for B's is the organization check.
    await ok(
      call(p.baseUrl, 'PATCH', `/v1/admin/organizations/${a.organizationId}`, {
        key: operator.key,
        json: { billing_usage_enabled: true },
      }),
      "A's usage report",
    );
    const etag = 'd41d8cd98f00b204e9800998ecf8427e';
    // [what, B's id, the request with an id, and where the id has a shape, one of that shape that is nobody's]
    const attacks: Array<[string, string, (id: string) => Promise<HttpResult>, string?]> = [
      // The queue of A's own deployment `web`, with B's job (B's deployment is also `web`).
      ['queue status', B.queueJob, (id) => v1('GET', `/queue/status?model=web&request_id=${id}`)],
      ['queue cancel', B.queueJob, (id) => v1('POST', '/queue/cancel', { model: 'web', request_id: id })],
      [
        'queue update',
        B.queueJob,
        (id) => v1('POST', '/queue/update', { model: 'web', request_id: id, claim_token: 'x', info: { mark: MARK } }),
      ],
      [
        'queue complete',
        B.queueJob,
        (id) => v1('POST', '/queue/complete', { model: 'web', request_id: id, claim_token: 'x', outputs: {} }),
      ],
      [
        'queue fail',
        B.queueJob,
        (id) => v1('POST', '/queue/fail', { model: 'web', request_id: id, claim_token: 'x', error: MARK }),
      ],
      [
        'multipart complete',
        B.multipartUpload,
        (id) => v1('POST', '/files/multipart/complete', { upload_id: id, parts: [{ part_number: 1, etag }] }),
      ],
      ['multipart abort', B.multipartUpload, (id) => v1('POST', '/files/multipart/abort', { upload_id: id })],
      ['fine-tune download', B.fineTune, (id) => v1('GET', `/finetune/download?ft_id=${id}`)],
      [
        'a fine-tune on B file',
        B.file,
        (id) => v1('POST', '/fine-tunes', { model: 'gantry/reference-byte-tiny', training_file: id }),
      ],
      [
        'a fine-tune validated on B file',
        B.file,
        (id) =>
          v1('POST', '/fine-tunes', {
            model: 'gantry/reference-byte-tiny',
            training_file: A.file,
            validation_file: id,
          }),
      ],
      [
        'a fine-tune from B checkpoint',
        B.fineTune,
        (id) => v1('POST', '/fine-tunes', { from_checkpoint: id, training_file: A.file }),
      ],
      [
        'a cluster on B volume',
        B.clusterVolume,
        (id) => v1('POST', '/compute/clusters', clusterBody({ num_gpus: 8, volume_id: id })),
      ],
      [
        'B cluster volume resized',
        B.clusterVolume,
        (id) => v1('PUT', '/compute/clusters/storage/volumes', { volume_id: id, size_tib: 4 }),
      ],
      [
        'a secret in B project',
        b.projectId,
        (id) => v1('POST', '/deployments/secrets', { name: 'x', value: MARK, project_id: id }),
      ],
      [
        'an upload into B model',
        B.model,
        (id) => v2('POST', '/models/uploads', { modelId: id, remoteUrl: 'http://127.0.0.1:1/x' }),
      ],
      ['B model downloaded', B.model, (id) => v2('POST', '/models/download', { objectId: id })],
      [
        'B model file upload completed',
        B.modelFileUpload,
        (id) =>
          v2('POST', '/models/upload/complete', {
            objectId: A.model,
            files: [
              {
                path: 'model.safetensors',
                hash: etag,
                uploadDetails: { uploadId: id, parts: [{ partNumber: 1, hash: etag }] },
              },
            ],
          }),
      ],
      [
        'B model served',
        B.model,
        (id) =>
          v2('POST', `/endpoints/${A.endpoint}/deployments`, {
            name: 'stolen',
            modelId: id,
            autoscaling: { minReplicas: 1, maxReplicas: 1 },
          }),
      ],
      [
        'B profile used',
        B.config,
        (id) =>
          v2('POST', `/endpoints/${A.endpoint}/deployments`, {
            name: 'stolen',
            modelId: 'gantry/reference-byte-tiny',
            configId: id,
            autoscaling: { minReplicas: 1, maxReplicas: 1 },
          }),
      ],
      [
        'a rollout to B deployment',
        B.endpointDeployment,
        (id) =>
          v2('POST', `/endpoints/${A.endpoint}/rollouts`, {
            sourceDeploymentId: A.endpointDeployment,
            targetDeploymentId: id,
          }),
      ],
      ['B usage report', b.organizationId, (id) => v1('GET', `/billing/usage?organization_id=${id}`)],
      [
        'B endpoint called at the gateway',
        `${b.projectSlug}/${B.endpointName}`,
        (id) =>
          call(p.gatewayUrl, 'POST', '/v1/chat/completions', {
            key: a.key,
            json: { model: id, messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 },
          }),
        `proj-nothing/${B.endpointName}`,
      ],
    ];
    for (const [what, id, send, nobodys = NOTHING] of attacks) {
      const theirs = await send(id);
      const nothing = await send(nobodys);
      const said = `${what}: ${theirs.status} ${JSON.stringify(theirs.body)}; for an id that exists nowhere: ${nothing.status} ${JSON.stringify(nothing.body)}`;
      assert.ok(theirs.status >= 400, said);
      assert.deepEqual(
        [theirs.status, theirs.body.error?.code, theirs.body.error?.param],
        [nothing.status, nothing.body.error?.code, nothing.body.error?.param],
        said,
      );
      assert.equal(String(theirs.body.error?.message).replaceAll(id, nobodys), nothing.body.error?.message, said);
    }
    // A's claim on its own `web` queue is A's job, never B's.
    const claim = await v1('POST', '/queue/claim', { model: 'web' });
    assert.equal(claim.body.request_id, A.queueJob);
    assert.deepEqual(await victimsView(), before, "B's resources after the attacks");
  });
});

/** What B sees of each of its resources (what an attack would change). */
async function victimsView() {
  const get = async (path: string) => {
    const res = await call(p.baseUrl, 'GET', path, { key: b.key });
    assert.equal(res.status, 200, `B reads ${path}: ${JSON.stringify(res.body)}`);
    assert.ok(!JSON.stringify(res.body).includes(MARK), `B's ${path} shows the attacker's mark`);
    return res.body;
  };
  const pick = (o: any, ...keys: string[]) => Object.fromEntries(keys.map((k) => [k, o[k]]));
  const withFlag = (o: any, field: string, attacked: RegExp, ...keys: string[]) => ({
    ...pick(o, ...keys),
    [`${field} says ${attacked}`]: attacked.test(String(o[field])),
  });
  const v2 = `/v2/projects/${b.projectId}`;
  return {
    project: pick(await get(`/v1/projects/${b.projectId}`), 'name', 'visibility'),
    members: (await get(`/v1/projects/${b.projectId}/members`)).data?.map((m: any) => m.user_id ?? m.id),
    organization: (await get('/v1/organization/members')).data?.map((m: any) => m.user_id ?? m.id),
    keys: (await get('/v1/api-keys')).data?.map((k: any) => [k.id, k.revoked_at ?? null]),
    file: pick(await get(`/v1/files/${B.file}`), 'filename', 'bytes', 'processing_status'),
    // What runs on its own may move on; what an attacker would do to it (cancel, delete) shows as a flag.
    fineTune: withFlag(await get(`/v1/fine-tunes/${B.fineTune}`), 'status', /cancel/i, 'training_file'),
    deployment: withFlag(await get(`/v1/deployments/${B.deployment}`), 'status', /delet|stop/i, 'name', 'min_replicas'),
    volume: pick(await get(`/v1/deployments/storage/volumes/${B.volume}`), 'name', 'current_version'),
    secret: pick(await get(`/v1/deployments/secrets/${B.secret}`), 'name', 'description', 'last_updated_by'),
    cluster: withFlag(await get(`/v1/compute/clusters/${B.cluster}`), 'status', /delet/i, 'num_gpus', 'deleted_at'),
    remediation: withFlag(
      await get(`/v1/compute/clusters/${B.cluster}/instances/${B.instance}/remediations/${B.remediation}`),
      'state',
      /CANCELLED/,
      'mode',
      'reviewed_by',
    ),
    clusterVolume: pick(
      await get(`/v1/compute/clusters/storage/volumes/${B.clusterVolume}`),
      'volume_name',
      'size_tib',
    ),
    model: pick(await get(`${v2}/models/${B.model}`), 'name', 'description'),
    upload: pick(await get(`${v2}/models/uploads/${B.upload}`), 'status'),
    endpoint: pick(await get(`${v2}/endpoints/${B.endpoint}`), 'name', 'etag'),
    endpointDeployment: pick(
      await get(`${v2}/endpoints/${B.endpoint}/deployments/${B.endpointDeployment}`),
      'name',
      'etag',
    ),
    rollout: pick(await get(`${v2}/endpoints/${B.endpoint}/rollouts/${B.rollout}`), 'state', 'etag'),
    config: pick(await get(`${v2}/configs/${B.config}`), 'id', 'selectors'),
    queueJob: pick(await get(`/v1/queue/status?model=web&request_id=${B.queueJob}`), 'status', 'info'),
    batch: withFlag(await get(`/v1/batches/${B.batch}`), 'status', /CANCELLED/, 'input_file_id', 'endpoint'),
    evaluation: pick(await get(`/v1/evaluation/${B.evaluation}`), 'type', 'parameters'),
  };
}
