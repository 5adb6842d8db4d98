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
  setCurrentDetails,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { statusSearchAttributes } from '../shared/search-attributes';
import { PATCHES } from './patches';
import type { AdapterControlActivities, AdapterHostActivities } from '../activities/adapters';
import { CONTAINERS_TASK_QUEUE } from '../shared/deployments';
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
}

export const setRevisionSignal = defineSignal<[{ revisionId: string; etag: string }]>('setRevision');
export const detachSignal = defineSignal('detach');

const host = proxyActivities<AdapterHostActivities>({
  taskQueue: CONTAINERS_TASK_QUEUE,
  startToCloseTimeout: '2 minutes',
  scheduleToStartTimeout: '1 minute',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds', maximumAttempts: 5 },
});
// Projections retry until PostgreSQL answers: a database outage of any length pauses the load's
// bookkeeping, never ends the load (retries add no history events).
const control = proxyActivities<AdapterControlActivities>({
  taskQueue: CONTROL_TASK_QUEUE,
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

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
  let searched = 'ADAPTER_LOAD_STATE_PENDING';
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
    let result;
    try {
      result = await host.loadAdapter({
        containerDeploymentId: input.containerDeploymentId,
        adapterModelId: input.adapterModelId,
        revisionId: loading.revisionId,
      });
    } catch (err) {
      result = { ready: 0, failed: 0, total: 0, reason: `no container host took the load: ${(err as Error).message}` };
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
    // (Before this patch the search attributes kept the state the API started it with.)
    if (state !== searched && patched(PATCHES.adapterLoadStatus.id)) {
      upsertSearchAttributes(statusSearchAttributes(state));
      searched = state;
    }
    setCurrentDetails(`${input.adapterModelId}: ${state} (${result.ready}/${result.total})`);
    await condition(() => detached || changed, `${input.resyncSeconds} seconds`);
    if (round + 1 >= maxRounds && !detached && !changed) {
      await continueAsNew<typeof adapterLoad>({ ...input, revisionId: desired.revisionId, etag: desired.etag });
    }
  }
  await control.recordAdapterLoad({
    ...ids,
    state: 'ADAPTER_LOAD_STATE_REMOVING',
    message: 'Unloading from every replica.',
  });
  await host
    .unloadAdapter({ containerDeploymentId: input.containerDeploymentId, adapterModelId: input.adapterModelId })
    .catch(() => 0);
  await control.removeAdapter(ids);
  return 'detached';
}
