/**
 * Rollouts through the API and the gateway, on one endpoint with two
 * deployments of the reference model (`blue` and `green`), while clients keep
 * calling the endpoint and note which deployment answered each request (the
 * gateway's `x-gantry-deployment` header):
 *   1. a canary blue -> green (50%, 100%, error-rate gate) completes: both
 *      answer during the 50% step, only green afterwards;
 *   2. a canary green -> blue, with an operator's injected faults on blue,
 *      pauses itself at its first gate (METRIC_REGRESSION) and is canceled,
 *      freezing the 50/50 split;
 *   3. a canary that an operator pauses, resumes and cancels;
 *   4. a blue-green cut-over that first brings the target to its final two
 *      replicas, then moves all traffic and stops the source;
 *   5. a rolling rollout back, one replica per batch: a target replica is
 *      added and ready, half the traffic moves, a source replica goes.
 * Also: the strict body, the SDK's refusals, one active rollout per endpoint,
 * preview-defaults, and another project's key.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { call, eventually, startTestPlatform, type TestPlatform } from '../helpers/platform';
import { createTenant, type Tenant } from '../helpers/tenants';

let p: TestPlatform;
let t: Tenant;
let admin: Tenant;
let blue: string;
let green: string;

const v2 = (method: string, url: string, json?: unknown, key = t.key) =>
  call(p.baseUrl, method, `/v2/projects/${t.projectId}/endpoints/roll${url}`, { key, json });
const rollout = (id: string) => v2('GET', `/rollouts/${id}`).then((r) => r.body);
/** The endpoint's events about one rollout, oldest first. */
const rolloutEvents = (id: string) =>
  call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/roll/events?subjectId=${id}&limit=100`, {
    key: t.key,
  }).then((r) => r.body.data.reverse()); // listed newest first
/** A canary of two steps (50%, 100%) gated on the target's error rate staying under 20%. */
const gatedCanary = (source: string, target: string) => ({
  sourceDeploymentId: source,
  targetDeploymentId: target,
  canary: { steps: [{ traffic: 50 }, { traffic: 100 }], stepInterval: '3s' },
  metrics: [
    { name: 'router_error_rate', thresholdCheck: { operator: 'THRESHOLD_OPERATOR_LT', value: 0.2 }, window: '2s' },
  ],
  finalSourceReplicas: 1,
});

/** Calls the endpoint until stopped, counting answers per deployment and status. */
function traffic() {
  const seen: Array<{ at: number; deployment: string | null; status: number }> = [];
  let running = true;
  const loops = Array.from({ length: 2 }, async () => {
    while (running) {
      const res = await call(p.gatewayUrl, 'POST', '/v1/completions', {
        key: t.key,
        json: { model: `${t.projectSlug}/roll`, prompt: 'hi', max_tokens: 1 },
      });
      seen.push({ at: Date.now(), deployment: res.headers.get('x-gantry-deployment'), status: res.status });
    }
  });
  return {
    seen,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

before(async () => {
  p = await startTestPlatform({ env: { GANTRY_ROLLOUT_BATCH_SOAK_SECONDS: '1' } });
  t = await createTenant(p.db);
  admin = await createTenant(p.db, { platformAdmin: true });
  assert.equal(
    (await call(p.baseUrl, 'POST', `/v2/projects/${t.projectId}/endpoints`, { key: t.key, json: { name: 'roll' } }))
      .status,
    200,
  );
  for (const name of ['blue', 'green']) {
    const res = await v2('POST', '/deployments', {
      name,
      modelId: 'gantry/reference-byte-tiny',
      autoscaling: { minReplicas: 1, maxReplicas: 1 },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  const ready = await eventually(
    () => v2('GET', '/deployments').then((r) => r.body.data),
    (ds: Array<{ id: string; name: string; status: { state: string } }>) =>
      ds.every((d) => d.status.state === 'DEPLOYMENT_STATE_READY'),
    90_000,
  );
  blue = ready.find((d) => d.name === 'blue')!.id;
  green = ready.find((d) => d.name === 'green')!.id;
  // Only blue serves before the first rollout.
  const split = await call(p.baseUrl, 'PATCH', `/v2/projects/${t.projectId}/endpoints/roll`, {
    key: t.key,
    json: { trafficSplit: [{ deploymentId: blue, weight: 100 }] },
  });
  assert.equal(split.status, 200);
});
after(() => p.stop());

describe('rollouts', () => {
  test('a create is checked: unknown fields, strategies, steps, gates', async () => {
    const base = { sourceDeploymentId: blue, targetDeploymentId: green };
    const cases: Array<[unknown, string]> = [
      [{ ...base, bogus: 1 }, 'bogus'],
      [{ ...base, canary: { steps: [{ traffic: 50 }] } }, 'canary.steps[0].traffic'],
      [{ ...base, canary: { steps: [{ traffic: 50 }, { traffic: 30 }, { traffic: 100 }] } }, 'canary.steps[1].traffic'],
      [
        {
          ...base,
          blueGreen: {},
          metrics: [{ name: 'router_error_rate', thresholdCheck: { operator: 'THRESHOLD_OPERATOR_LT', value: 0.1 } }],
        },
        'metrics',
      ],
      [{ ...base, canary: {}, rolling: {} }, 'canary'],
      [
        {
          ...base,
          metrics: [{ name: 'router_error_rate', thresholdCheck: { operator: 'THRESHOLD_OPERATOR_LT', value: 0 } }],
        },
        'metrics[0].thresholdCheck',
      ],
      [
        {
          ...base,
          metrics: [{ name: 'router_latency', thresholdCheck: { operator: 'THRESHOLD_OPERATOR_LT', value: 100 } }],
        },
        'metrics[0].stat',
      ],
      [{ ...base, targetDeploymentId: blue }, 'targetDeploymentId'],
      [{ ...base, canary: { stepInterval: 'soon' } }, 'canary.stepInterval'],
    ];
    for (const [body, param] of cases) {
      const res = await v2('POST', '/rollouts', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.equal(res.body.error.param, param, JSON.stringify(res.body));
    }
    const unknownQuery = await v2('GET', '/rollouts?color=red');
    assert.equal(unknownQuery.status, 400);
    assert.equal(unknownQuery.body.error.param, 'color');
  });

  test('preview-defaults fills in the ladder and the replica counts without creating anything', async () => {
    const res = await v2('POST', '/rollouts/preview-defaults', {
      sourceDeploymentId: blue,
      targetDeploymentId: green,
      canary: {},
      finalTargetReplicas: 2,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.estimatedEffectiveSteps.map((s: { traffic: number }) => s.traffic),
      [5, 25, 50, 100],
    );
    assert.equal(res.body.spec.canary.stepInterval, '180s');
    assert.equal(res.body.sourceReplicas, 1);
    assert.equal(res.body.targetMaxReplicas, 1);
    assert.deepEqual(
      res.body.warnings.map((w: { code: string }) => w.code),
      ['ROLLOUT_WILL_RAISE_TARGET_MAX'],
    );
    assert.equal((await v2('GET', '/rollouts')).body.data.length, 0);
  });

  test('a canary completes: both deployments serve during the 50% step, then only the target', async () => {
    const created = await v2('POST', '/rollouts', gatedCanary(blue, green));
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.id;
    assert.match(id, /^rol_/);
    assert.equal(created.body.state, 'ROLLOUT_STATE_PENDING');
    assert.equal(created.body.strategy, 'ROLLOUT_STRATEGY_TYPE_CANARY');
    assert.equal(created.body.status.totalSteps, 2);

    const second = await v2('POST', '/rollouts', { sourceDeploymentId: green, targetDeploymentId: blue });
    assert.equal(second.status, 409);

    const load = traffic();
    let completedAt = 0;
    let startedAt = 0;
    let secondStepAt = 0;
    try {
      const started = await v2('POST', `/rollouts/${id}/start`);
      startedAt = Date.now();
      assert.equal(started.status, 200, JSON.stringify(started.body));
      assert.equal(started.body.state, 'ROLLOUT_STATE_RUNNING');
      assert.equal((await v2('DELETE', `/rollouts/${id}`)).status, 409);
      assert.equal((await v2('DELETE', `/deployments/${blue}`)).status, 409);
      const done = await eventually(
        () => rollout(id),
        (r) => r.state === 'ROLLOUT_STATE_COMPLETED',
        60_000,
      );
      completedAt = Date.now();
      secondStepAt = Date.parse(done.status.steps[1].startedAt);
      assert.equal(done.currentTrafficPercent, 100);
      assert.deepEqual(
        done.status.steps.map((s: { state: string; targetTrafficPercent: number }) => [
          s.targetTrafficPercent,
          s.state,
        ]),
        [
          [50, 'ROLLOUT_STEP_STATE_PASSED'],
          [100, 'ROLLOUT_STEP_STATE_PASSED'],
        ],
      );
      for (const s of done.status.steps) {
        assert.equal(s.metrics[0].name, 'router_error_rate');
        assert.equal(s.metrics[0].verdict, 'METRIC_VERDICT_PASS');
        assert.equal(s.metrics[0].targetValue, 0);
      }
      // A second after completion, the gateway sends everything to the target (checked below, on
      // what the load saw once it has some of those answers).
      await eventually(
        async () => load.seen.filter((s) => s.at > completedAt + 1000).length,
        (n) => n >= 10,
        30_000,
        50,
      );
    } finally {
      await load.stop();
    }
    // The gateway reuses its view of the split for at most 500 ms.
    const during = load.seen.filter((s) => s.at > startedAt + 600 && s.at < secondStepAt);
    assert.ok(during.some((s) => s.deployment === blue) && during.some((s) => s.deployment === green));
    const afterwards = load.seen.filter((s) => s.at > completedAt + 1000);
    assert.ok(afterwards.length > 0);
    assert.ok(
      afterwards.every((s) => s.deployment === green && s.status === 200),
      JSON.stringify(afterwards.slice(0, 5)),
    );

    const endpoint = (await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/roll`, { key: t.key })).body;
    assert.deepEqual(endpoint.trafficSplit, [{ deploymentId: green, weight: 100 }]);
    const events = await rolloutEvents(id);
    const types = events.map((e: { type: string }) => e.type);
    for (const type of [
      'rollout.created',
      'rollout.started',
      'endpoint.traffic_changed',
      'rollout.step_passed',
      'rollout.completed',
    ])
      assert.ok(types.includes(type), `${type} in ${types}`);

    const active = await v2('GET', '/rollouts?filter=ROLLOUT_FILTER_ACTIVE');
    assert.equal(active.body.data.length, 0);
    const terminal = await v2('GET', '/rollouts?filter=ROLLOUT_FILTER_TERMINAL');
    assert.deepEqual(
      terminal.body.data.map((r: { id: string }) => r.id),
      [id],
    );
    // A completed rollout has no workflow left to ask: the same refusal its validator gives a running one.
    const pauseDone = await v2('POST', `/rollouts/${id}/pause`, {});
    assert.equal(pauseDone.status, 409);
    assert.equal(pauseDone.body.error.code, 'rollout_state');
    assert.equal(pauseDone.body.error.message, 'Cannot pause a rollout that is ROLLOUT_STATE_COMPLETED.');
  });

  test('a canary whose target fails at the gateway pauses itself, and cancel freezes the split', async () => {
    const fault = await call(p.baseUrl, 'PUT', `/v1/admin/endpoint-deployments/${blue}/fault-injection`, {
      key: admin.key,
      json: { abortPercent: 100, httpStatus: 503 },
    });
    assert.equal(fault.status, 200, JSON.stringify(fault.body));
    const notAdmin = await call(p.baseUrl, 'PUT', `/v1/admin/endpoint-deployments/${blue}/fault-injection`, {
      key: t.key,
      json: { abortPercent: 100 },
    });
    assert.equal(notAdmin.status, 403);

    const created = await v2('POST', '/rollouts', gatedCanary(green, blue));
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.id;
    const load = traffic();
    try {
      assert.equal((await v2('POST', `/rollouts/${id}/start`)).status, 200);
      const paused = await eventually(
        () => rollout(id),
        (r) => r.state === 'ROLLOUT_STATE_SYSTEM_PAUSED',
        60_000,
      );
      assert.equal(paused.status.condition.category, 'ROLLOUT_FAILURE_CATEGORY_METRIC_REGRESSION');
      assert.equal(paused.status.condition.atStep, 0);
      const step = paused.status.steps[0];
      assert.equal(step.state, 'ROLLOUT_STEP_STATE_FAILED');
      assert.match(step.failureReason, /router_error_rate/);
      assert.equal(step.metrics[0].verdict, 'METRIC_VERDICT_BREACHED');
      assert.equal(step.metrics[0].targetValue, 1);
      assert.equal(paused.status.steps[1].state, 'ROLLOUT_STEP_STATE_PENDING');
      assert.equal(paused.currentTrafficPercent, 50);
      assert.ok(paused.pauseInfo.pausedAt);

      const pauseAgain = await v2('POST', `/rollouts/${id}/pause`, {});
      assert.equal(pauseAgain.status, 409);
      // The workflow's validator refused it, with the code the API answers every state refusal with.
      assert.equal(pauseAgain.body.error.code, 'rollout_state');
      assert.equal(pauseAgain.body.error.message, 'Cannot pause a rollout that is ROLLOUT_STATE_SYSTEM_PAUSED.');
      const stale = await v2('POST', `/rollouts/${id}/cancel`, { reason: 'bad build', etag: 'stale' });
      assert.equal(stale.status, 409);

      // Revert: the broken target's share goes back to the source.
      const cancel = await v2('POST', `/rollouts/${id}/cancel`, {
        reason: 'blue build is broken',
        disposition: 'CANCEL_DISPOSITION_REVERT',
      });
      assert.equal(cancel.status, 200, JSON.stringify(cancel.body));
      const canceled = await eventually(
        () => rollout(id),
        (r) => r.state === 'ROLLOUT_STATE_CANCELED',
        30_000,
      );
      assert.equal(canceled.status.condition.category, 'ROLLOUT_FAILURE_CATEGORY_ABORTED_BY_OPERATOR');
      assert.match(canceled.status.condition.message, /blue build is broken.*back on the source/);
      assert.equal(canceled.status.steps[0].state, 'ROLLOUT_STEP_STATE_CANCELED');
      assert.equal(canceled.currentTrafficPercent, 0);
      assert.ok(canceled.completedAt);
      // Requests sent after the revert all reach the source, once the gateway's route cache (500 ms)
      // has let go of the old split.
      const settled = Date.now() + 1_000;
      const sentAfter = () => load.seen.filter((s) => s.at > settled);
      await eventually(
        async () => sentAfter().length,
        (n) => n >= 10,
        30_000,
      );
      assert.ok(
        sentAfter().every((s) => s.deployment === green && s.status === 200),
        JSON.stringify(sentAfter()),
      );
    } finally {
      await load.stop();
    }
    const failures = load.seen.filter((s) => s.status === 503);
    assert.ok(failures.length > 0 && failures.every((s) => s.deployment === blue));
    const endpoint = (await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/roll`, { key: t.key })).body;
    assert.deepEqual(
      endpoint.trafficSplit.map((s: { deploymentId: string; weight: number }) => [s.deploymentId, s.weight]).sort(),
      [
        [blue, 0],
        [green, 100],
      ].sort(),
    );
    assert.equal(
      (await call(p.baseUrl, 'DELETE', `/v1/admin/endpoint-deployments/${blue}/fault-injection`, { key: admin.key }))
        .status,
      200,
    );
  });

  test('an operator pauses, resumes and cancels a canary; another project cannot see it', async () => {
    const created = await v2('POST', '/rollouts', {
      sourceDeploymentId: green,
      targetDeploymentId: blue,
      canary: { steps: [{ traffic: 75 }, { traffic: 100 }], stepInterval: '600s' },
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const id = created.body.id;
    assert.equal((await v2('POST', `/rollouts/${id}/start`)).status, 200);
    await eventually(
      () => rollout(id),
      (r) => r.currentTrafficPercent === 75 && r.status.steps[0].state === 'ROLLOUT_STEP_STATE_RUNNING',
      30_000,
    );

    const pausing = await v2('POST', `/rollouts/${id}/pause`, { reason: 'looking at dashboards' });
    assert.equal(pausing.status, 200, JSON.stringify(pausing.body));
    assert.ok(['ROLLOUT_STATE_PAUSING', 'ROLLOUT_STATE_PAUSED'].includes(pausing.body.state));
    const paused = await eventually(
      () => rollout(id),
      (r) => r.state === 'ROLLOUT_STATE_PAUSED',
      30_000,
    );
    assert.equal(paused.pauseInfo.reason, 'looking at dashboards');
    assert.equal(paused.status.steps[0].state, 'ROLLOUT_STEP_STATE_PAUSED');

    const resumed = await v2('POST', `/rollouts/${id}/resume`, {});
    assert.equal(resumed.status, 200);
    assert.equal(resumed.body.state, 'ROLLOUT_STATE_RUNNING');
    assert.equal(resumed.body.pauseInfo, undefined);

    const other = await createTenant(p.db);
    const foreign = await call(p.baseUrl, 'GET', `/v2/projects/${other.projectId}/endpoints/roll/rollouts/${id}`, {
      key: other.key,
    });
    assert.equal(foreign.status, 404);
    const cross = await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/roll/rollouts/${id}`, {
      key: other.key,
    });
    assert.equal(cross.status, 404);

    assert.equal((await v2('POST', `/rollouts/${id}/cancel`, { reason: 'not today' })).status, 200);
    const canceled = await eventually(
      () => rollout(id),
      (r) => r.state === 'ROLLOUT_STATE_CANCELED',
      30_000,
    );
    assert.equal(canceled.currentTrafficPercent, 75);
    const split = (await call(p.baseUrl, 'GET', `/v2/projects/${t.projectId}/endpoints/roll`, { key: t.key })).body
      .trafficSplit;
    assert.deepEqual(
      split.map((s: { deploymentId: string; weight: number }) => [s.deploymentId, s.weight]).sort(),
      [
        [blue, 75],
        [green, 25],
      ].sort(),
    );
    assert.equal((await v2('DELETE', `/rollouts/${id}`)).status, 200);
    assert.equal((await v2('GET', `/rollouts/${id}`)).status, 404);
  });

  test('blue-green: the target reaches its final replicas, then takes all traffic; the source stops', async () => {
    const created = await v2('POST', '/rollouts', {
      sourceDeploymentId: blue,
      targetDeploymentId: green,
      blueGreen: {},
      finalTargetReplicas: 2,
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.equal(created.body.strategy, 'ROLLOUT_STRATEGY_TYPE_BLUE_GREEN');
    assert.equal(created.body.status.totalSteps, 1);
    const id = created.body.id;
    assert.equal((await v2('POST', `/rollouts/${id}/start`)).status, 200);
    const done = await eventually(
      () => rollout(id),
      (r) => r.state === 'ROLLOUT_STATE_COMPLETED',
      90_000,
    );
    assert.deepEqual(
      done.status.steps.map((s: { state: string }) => s.state),
      ['ROLLOUT_STEP_STATE_PASSED'],
    );
    const target = (await v2('GET', `/deployments/${green}`)).body;
    assert.equal(target.status.readyReplicas, 2);
    assert.equal(target.autoscaling.minReplicas, 2);
    const events = (await rolloutEvents(id)).map((e: { type: string; message: string }) => `${e.type}: ${e.message}`);
    const raised = events.findIndex(
      (e: string) => e.startsWith('deployment.replica_bounds_changed') && e.includes('2..2'),
    );
    const shifted = events.findIndex(
      (e: string) => e.startsWith('endpoint.traffic_changed') && e.includes('step 0: 100%'),
    );
    assert.ok(raised >= 0 && raised < shifted, events.join('\n'));
    await eventually(
      () => v2('GET', `/deployments/${blue}`).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_STOPPED' && d.status.readyReplicas === 0,
      30_000,
    );
    const answer = await call(p.gatewayUrl, 'POST', '/v1/completions', {
      key: t.key,
      json: { model: `${t.projectSlug}/roll`, prompt: 'hi', max_tokens: 1 },
    });
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get('x-gantry-deployment'), green);
  });

  test('rolling: each batch adds a target replica, moves its share of traffic, then drains a source replica', async () => {
    const created = await v2('POST', '/rollouts', {
      sourceDeploymentId: green,
      targetDeploymentId: blue,
      rolling: {},
    });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    assert.deepEqual(
      created.body.status.steps.map((s: { targetTrafficPercent: number }) => s.targetTrafficPercent),
      [50, 100],
      'the final target replicas default to the source count (2): two batches',
    );
    const id = created.body.id;
    assert.equal((await v2('POST', `/rollouts/${id}/start`)).status, 200);
    await eventually(
      () => rollout(id),
      (r) => r.state === 'ROLLOUT_STATE_COMPLETED',
      120_000,
    );
    const events = (await rolloutEvents(id))
      .filter(
        (e: { type: string }) =>
          e.type === 'deployment.replica_bounds_changed' || e.type === 'endpoint.traffic_changed',
      )
      .map((e: { deploymentId?: string; message: string }) => {
        const bounds = /replicas (\d+\.\.\d+)/.exec(e.message);
        const traffic = /: (\d+)% to target/.exec(e.message);
        return bounds ? `${e.deploymentId === blue ? 'blue' : 'green'} ${bounds[1]}` : `traffic ${traffic?.[1]}`;
      });
    assert.deepEqual(events, [
      'blue 1..2', // lifted from 0..0 to serve
      'blue 1..2', // batch 0: one target replica
      'traffic 50',
      'green 1..1', // one source replica drained
      'blue 2..2', // batch 1
      'traffic 100',
      'green 0..0',
      'traffic 100', // completion: the source leaves the split
      'blue 2..2', // landed: floor and ceiling
      'green 0..0', // drained
    ]);
    const target = await eventually(
      () => v2('GET', `/deployments/${blue}`).then((r) => r.body),
      (d) => d.status.readyReplicas === 2,
      30_000,
    );
    assert.equal(target.status.state, 'DEPLOYMENT_STATE_READY');
    await eventually(
      () => v2('GET', `/deployments/${green}`).then((r) => r.body),
      (d) => d.status.state === 'DEPLOYMENT_STATE_STOPPED',
      30_000,
    );
  });
});
