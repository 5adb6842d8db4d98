/** Helpers for cluster tests: a platform with fast simulator timings, create bodies, waiting for phases. */
import { call, eventually, startTestPlatform, type TestPlatform } from './platform';

/** Simulator and workflow timings small enough for tests (the spec's 300 s drain becomes 2 s). */
export const FAST_CLUSTERS = {
  GANTRY_FLEET_STEP_MS: '20',
  GANTRY_CLUSTER_HEALTH_CHECK_SECONDS: '1',
  GANTRY_CLUSTER_AUTOSCALE_COOLDOWN_SECONDS: '1',
  GANTRY_PREEMPTION_GRACE_SECONDS: '2',
  GANTRY_CLUSTER_TEST_REPAIR_ROUNDS: '2',
};

export function startClusterPlatform(env: Record<string, string> = {}): Promise<TestPlatform> {
  return startTestPlatform({ gpuTypes: ['H100_SXM'], env: { ...FAST_CLUSTERS, ...env } });
}

export const REGION = 'sim-us-east-1';
export const NVIDIA_VERSION_ID = 'sim-us-east-1-cuda12.6-drv560-ubuntu-22.04';

export function clusterBody(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    cluster_name: 'train-a',
    region: REGION,
    gpu_type: 'H100_SXM',
    num_gpus: 16,
    billing_type: 'ON_DEMAND',
    nvidia_version_id: NVIDIA_VERSION_ID,
    ...extra,
  };
}

export async function createCluster(p: TestPlatform, key: string, extra: Record<string, unknown> = {}) {
  const res = await call(p.baseUrl, 'POST', '/v1/compute/clusters', { key, json: clusterBody(extra) });
  if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

export function getCluster(p: TestPlatform, key: string, id: string) {
  return call(p.baseUrl, 'GET', `/v1/compute/clusters/${id}`, { key }).then((r) => r.body);
}

/** Waits until the cluster satisfies `done` (30 s by default). */
export function waitForCluster(
  p: TestPlatform,
  key: string,
  id: string,
  done: (c: any) => boolean,
  timeoutMs = 30_000,
) {
  return eventually(() => getCluster(p, key, id), done, timeoutMs);
}

export const phasesOf = (c: any): string[] =>
  c.phase_transitions.map((t: any) => t.phase.replace('CLUSTER_PHASE_', ''));
export const eventsOf = (c: any, reason?: string): any[] =>
  (c.node_lifecycle_events ?? []).filter((e: any) => !reason || e.reason === reason);

/** Attempts of `activity` the cluster's current run has finished (completed or failed), and that run. */
async function finishedAttempts(p: TestPlatform, clusterId: string, activity: string) {
  const { runId } = await p.temporal.workflow.getHandle(`cluster/${clusterId}`).describe();
  const history = await p.temporal.workflow.getHandle(`cluster/${clusterId}`, runId).fetchHistory();
  const events = history.events ?? [];
  const ofActivity = new Set(
    events
      .filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === activity)
      .map((e) => String(e.eventId)),
  );
  const finished = events.filter((e) => {
    const done = e.activityTaskCompletedEventAttributes ?? e.activityTaskFailedEventAttributes;
    return done && ofActivity.has(String(done.scheduledEventId));
  }).length;
  return { runId, finished };
}

/**
 * Waits until the cluster's workflow has finished `n` more attempts of `activity` (a health check, a
 * workload observation) than when this was called, across continue-as-new: the positive evidence
 * that it had its chance to act, for a test that then checks it did not.
 */
export async function afterMoreAttempts(
  p: TestPlatform,
  clusterId: string,
  activity: 'runHealthCheck' | 'observeWorkload',
  n: number,
  timeoutMs = 30_000,
): Promise<void> {
  const start = await finishedAttempts(p, clusterId, activity);
  await eventually(
    () => finishedAttempts(p, clusterId, activity),
    // After a continue-as-new only the new run's attempts count: a lower bound of what happened.
    (now) => (now.runId === start.runId ? now.finished - start.finished : now.finished) >= n,
    timeoutMs,
  );
}

/** Deletes every live cluster of the key's project and waits until each is gone (keeps later test files quiet). */
export async function deleteAllClusters(p: TestPlatform, key: string): Promise<void> {
  const list = await call(p.baseUrl, 'GET', '/v1/compute/clusters', { key });
  const ids: string[] = list.body.clusters.map((c: any) => c.cluster_id);
  await Promise.all(ids.map((id) => call(p.baseUrl, 'DELETE', `/v1/compute/clusters/${id}`, { key })));
  await Promise.all(ids.map((id) => waitForCluster(p, key, id, (c) => !!c.deleted_at)));
}
