/**
 * The behaviour of an adapter load (`adapterLoad`, in adapters.ts): the
 * revision it should have everywhere, what it last saw, and its steps: one
 * load round on every host that holds replicas (projected, with the status
 * operators search by), the wait for a change or the next resync, and the
 * unload at the end. Workflow code: a change to the commands it issues goes
 * behind a patch (patches.ts).
 */
import { condition, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { PATCHES } from './patches';
import { StatusProjection } from './entity-kit';
import { failureMessage } from './failures';
import type { AdapterControlActivities, AdapterHostActivities, AdapterLoadResult } from '../activities/adapters';
import { CONTAINERS_TASK_QUEUE } from '../shared/deployments';
import { CONTROL_TASK_QUEUE } from '../shared/task-queues';
import type { AdapterLoadInput } from './adapters';

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

type Revision = { revisionId: string; etag: string };

export class AdapterLoadEntity {
  /** The revision every replica should have (signal `setRevision`). */
  private desired: Revision;
  /** A new revision arrived during this round. */
  private changed = false;
  /** Signal `detach` arrived: the load ends. */
  detached = false;
  /** The revision every replica had at the last round that found them all READY. */
  private realized: string | undefined;
  private readonly ids: { deploymentId: string; adapterModelId: string };
  private readonly maxRounds: number;
  // The state operators search by (GantryStatus/GantryPhase); the API starts the run with PENDING.
  // (Before this patch the search attributes kept the state the API started it with.)
  private readonly status = new StatusProjection('ADAPTER_LOAD_STATE_PENDING', () =>
    patched(PATCHES.adapterLoadStatus.id),
  );

  constructor(private readonly input: AdapterLoadInput) {
    this.desired = { revisionId: input.revisionId, etag: input.etag };
    this.ids = { deploymentId: input.deploymentId, adapterModelId: input.adapterModelId };
    this.maxRounds = input.maxRounds ?? 500;
  }

  /** Signal `setRevision`. */
  setRevision(next: Revision): void {
    this.desired = next;
    this.changed = true;
  }

  /** Signal `detach`. */
  detach(): void {
    this.detached = true;
  }

  /** One round: the desired revision loaded on every replica there is, and the outcome projected. */
  async load(): Promise<void> {
    const input = this.input;
    const ids = this.ids;
    this.changed = false;
    const loading = this.desired;
    // LOADING when there is something new to load; a resync of a loaded revision does not flap the state.
    if (loading.revisionId !== this.realized)
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
    if (state === 'ADAPTER_LOAD_STATE_READY') this.realized = loading.revisionId;
    this.status.show(state, `${input.adapterModelId}: ${state} (${result.ready}/${result.total})`);
  }

  /** Until the next resync, unless a new revision or a detach comes first. */
  async waitForChange(): Promise<void> {
    await condition(() => this.detached || this.changed, `${this.input.resyncSeconds} seconds`);
  }

  /** Whether this run has done its share (rounds, or history) and nothing new is pending. */
  mayHandOver(round: number): boolean {
    const historyFull =
      patched(PATCHES.adapterLoadPerHost.id) && workflowInfo().historyLength >= (this.input.maxHistoryEvents ?? 8000);
    return (round + 1 >= this.maxRounds || historyFull) && !this.detached && !this.changed;
  }

  /** The input of the next run: the revision desired now. */
  carried(): AdapterLoadInput {
    return { ...this.input, revisionId: this.desired.revisionId, etag: this.desired.etag };
  }

  /** What operators search by once the load is detached: GantryPhase done. */
  ended(): void {
    this.status.end('ADAPTER_LOAD_STATE_DETACHED', `${this.input.adapterModelId}: detached`);
  }

  /** The end: REMOVING projected, the adapter unloaded from every replica, its rows removed. */
  async unload(): Promise<void> {
    const input = this.input;
    const ids = this.ids;
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
  }
}
