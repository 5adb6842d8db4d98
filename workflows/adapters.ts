/**
 * adapterLoad (`adapter-load/<deployment>/<adapter>`): keeps a LoRA adapter
 * loaded on every replica of an endpoint deployment, for one cluster. It moves
 * through ADAPTER_LOAD_STATE_PENDING (no replica yet), LOADING, READY (every
 * replica has the desired revision) or FAILED (a replica refused it, with the
 * reason), and looks again every `resyncSeconds` so replicas started later
 * (scale-up, restarts, waking from zero) get it too. A new desired revision
 * (signal `setRevision`) loads at once; `detach` unloads it (REMOVING) and ends.
 *
 * This file wires the signals and the loop, which only asks the entity; what
 * the load does lives in AdapterLoadEntity (adapter-load-entity.ts).
 */
import { continueAsNew, defineSignal, patched, setHandler } from '@temporalio/workflow';
import { ADAPTER_LOAD_MESSAGES } from '../shared/adapter-loads';
import { AdapterLoadEntity } from './adapter-load-entity';
import { PATCHES } from './patches';

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

export async function adapterLoad(input: AdapterLoadInput): Promise<'detached'> {
  const a = new AdapterLoadEntity(input);
  setHandler(setRevisionSignal, (next) => a.setRevision(next));
  setHandler(detachSignal, () => a.detach());
  for (let round = 0; !a.detached; round++) {
    await a.load();
    await a.waitForChange();
    if (a.mayHandOver(round)) await continueAsNew<typeof adapterLoad>(a.carried());
  }
  await a.unload();
  if (patched(PATCHES.adapterLoadEndedStatus.id)) a.ended();
  return 'detached';
}
