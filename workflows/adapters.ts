/**
 * adapterLoad (`adapter-load/<deployment>/<adapter>`): keeps a LoRA adapter
 * loaded on every replica of an endpoint deployment, for one cluster. It moves
 * through ADAPTER_LOAD_STATE_PENDING (no replica yet), LOADING, READY (every
 * replica has the desired revision) or FAILED (a replica refused it, with the
 * reason), and looks again every `resyncSeconds` so replicas started later
 * (scale-up, restarts, waking from zero) get it too. A new desired revision
 * (signal `setRevision`) loads at once; `detach` unloads it (REMOVING) and ends.
 */
import {
  condition,
  continueAsNew,
  defineSignal,
  patched,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { PATCHES } from './patches';
import { StatusProjection } from './entity-kit';
import { failureMessage } from './failures';
import type { AdapterControlActivities, AdapterHostActivities, AdapterLoadResult } from '../activities/adapters';
import { CONTAINERS_TASK_QUEUE } from '../shared/deployments';
import { ADAPTER_LOAD_MESSAGES } from '../shared/adapter-loads';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';

export interface AdapterLoadInput {
  deploymentId: string;
  containerDeploymentId: string;
  adapterModelId: string;
  revisionId: string;
  etag: string;
  resyncSeconds: number;
  /** Rounds of one run before it continues as new. */
  maxRounds?: number;
  /**
   * History events of one run before it continues as new (runs with the adapterLoadPerHost patch):
   * a round costs a few events per host that holds replicas, so many hosts fill a run sooner.
   */
  maxHistoryEvents?: number;
}

export const setRevisionSignal = defineSignal<[{ revisionId: string; etag: string }]>(
  ADAPTER_LOAD_MESSAGES.setRevision,
);
export const detachSignal = defineSignal(ADAPTER_LOAD_MESSAGES.detach);

const HOST_OPTIONS = {
  startToCloseTimeout: '2 minutes',
  scheduleToStartTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
} as const;
/** Runs from before the adapterLoadPerHost patch: one task on the shared queue, for every replica. */
const host = proxyActivities<AdapterHostActivities>({ ...HOST_OPTIONS, taskQueue: CONTAINERS_TASK_QUEUE });
/** The activities of one container host, on its own queue. */
const onHost = (hostQueue: string) => proxyActivities<AdapterHostActivities>({ ...HOST_OPTIONS, taskQueue: hostQueue });
// Projections retry until PostgreSQL answers: a database outage of any length pauses the load's
// bookkeeping, never ends the load (retries add no history events).
const control = proxyActivities<AdapterControlActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/**
 * Loads the revision on every host that holds replicas, each on its own queue, and adds up what they
 * report. A host that cannot be reached (it died, or is busy past the wait) counts its replicas as
 * failed, with the reason: the next resync tries again, and a host that is gone for good loses its
 * replicas meanwhile.
 */
async function loadOnEachHost(a: {
  containerDeploymentId: string;
  adapterModelId: string;
  revisionId: string;
}): Promise<AdapterLoadResult> {
  const hosts = await control.replicaHosts({ containerDeploymentId: a.containerDeploymentId });
  const results = await Promise.all(
    hosts.map((h) =>
      onHost(h.hostQueue)
        .loadAdapter({ ...a, thisHostOnly: true })
        .catch((err: unknown): AdapterLoadResult => ({
          ready: 0,
          failed: h.replicas,
          total: h.replicas,
          reason: `container host ${h.hostQueue} did not take the load: ${failureMessage(err)}`,
        })),
    ),
  );
  return results.reduce<AdapterLoadResult>(
    (sum, r) => ({
      ready: sum.ready + r.ready,
      failed: sum.failed + r.failed,
      total: sum.total + r.total,
      reason: sum.reason ?? r.reason,
    }),
    { ready: 0, failed: 0, total: 0 },
  );
}

export async function adapterLoad(input: AdapterLoadInput): Promise<'detached'> {
  let desired = { revisionId: input.revisionId, etag: input.etag };
  let changed = false;
  let detached = false;
  setHandler(setRevisionSignal, (next) => {
    desired = next;
    changed = true;
  });
  setHandler(detachSignal, () => {
    detached = true;
  });
  const ids = { deploymentId: input.deploymentId, adapterModelId: input.adapterModelId };
  const maxRounds = input.maxRounds ?? 500;
  let realized: string | undefined;
  // The state operators search by (GantryStatus/GantryPhase); the API starts the run with PENDING.
  // (Before this patch the search attributes kept the state the API started it with.)
  const status = new StatusProjection('ADAPTER_LOAD_STATE_PENDING', () => patched(PATCHES.adapterLoadStatus.id));
  for (let round = 0; !detached; round++) {
    changed = false;
    const loading = desired;
    // LOADING when there is something new to load; a resync of a loaded revision does not flap the state.
    if (loading.revisionId !== realized)
      await control.recordAdapterLoad({
        ...ids,
        state: 'ADAPTER_LOAD_STATE_LOADING',
        message: `Loading revision ${loading.revisionId}.`,
      });
    const load = { containerDeploymentId: input.containerDeploymentId, adapterModelId: input.adapterModelId };
    let result: AdapterLoadResult;
    if (patched(PATCHES.adapterLoadPerHost.id)) {
      result = await loadOnEachHost({ ...load, revisionId: loading.revisionId });
    } else {
      try {
        result = await host.loadAdapter({ ...load, revisionId: loading.revisionId });
      } catch (err) {
        result = {
          ready: 0,
          failed: 0,
          total: 0,
          reason: `no container host took the load: ${(err as Error).message}`,
        };
      }
    }
    const state =
      result.failed > 0
        ? 'ADAPTER_LOAD_STATE_FAILED'
        : result.total === 0
          ? 'ADAPTER_LOAD_STATE_PENDING'
          : 'ADAPTER_LOAD_STATE_READY';
    await control.recordAdapterLoad({
      ...ids,
      state,
      ready: result.ready,
      failed: result.failed,
      total: result.total,
      ...(state === 'ADAPTER_LOAD_STATE_READY'
        ? { realizedRevisionId: loading.revisionId, realizedEtag: loading.etag }
        : {}),
      reason: result.reason,
      message:
        state === 'ADAPTER_LOAD_STATE_PENDING'
          ? 'No replica is running (scaled to zero or starting); it loads when one is.'
          : `${result.ready} of ${result.total} replica(s) have revision ${loading.revisionId}.`,
    });
    if (state === 'ADAPTER_LOAD_STATE_READY') realized = loading.revisionId;
    status.show(state, `${input.adapterModelId}: ${state} (${result.ready}/${result.total})`);
    await condition(() => detached || changed, `${input.resyncSeconds} seconds`);
    const historyFull =
      patched(PATCHES.adapterLoadPerHost.id) && workflowInfo().historyLength >= (input.maxHistoryEvents ?? 8000);
    if ((round + 1 >= maxRounds || historyFull) && !detached && !changed) {
      await continueAsNew<typeof adapterLoad>({ ...input, revisionId: desired.revisionId, etag: desired.etag });
    }
  }
  await control.recordAdapterLoad({
    ...ids,
    state: 'ADAPTER_LOAD_STATE_REMOVING',
    message: 'Unloading from every replica.',
  });
  const unload = { containerDeploymentId: input.containerDeploymentId, adapterModelId: input.adapterModelId };
  if (patched(PATCHES.adapterLoadPerHost.id)) {
    const hosts = await control.replicaHosts(unload);
    await Promise.all(
      hosts.map((h) =>
        onHost(h.hostQueue)
          .unloadAdapter({ ...unload, thisHostOnly: true })
          .catch(() => 0),
      ),
    );
  } else {
    await host.unloadAdapter(unload).catch(() => 0);
  }
  await control.removeAdapter(ids);
  return 'detached';
}
